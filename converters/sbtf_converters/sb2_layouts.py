"""Parameter names, shapes and order of stable-baselines 2.10 models (``get_parameter_list()``).

Each ``*_layout(...)`` function returns the ordered list ``[(name, shape), ...]`` that SB2 2.10 saves for
one algorithm and policy architecture, following the rules of the SB2 reference (sections 2 and 4-9):
actor-critic policies (Mlp / Cnn / Lstm / LnLstm, ``net_arch`` or ``layers``), DQN Q-networks (dueling,
layer norm, parameter noise), SAC, TD3 and DDPG (layer norm, observation/return normalisation, parameter
noise), TRPO's ``oldpi`` copy and GAIL's adversary. Files written before 2.6 store these lists without
names, so the converter assigns names by position from these tables, and every file is checked against
them.

Architectures are described by small dataclasses; :func:`candidate_*` functions enumerate the
architectures compatible with a list of shapes (used to infer ``layers`` / ``net_arch`` of files whose
policy class or ``policy_kwargs`` do not say them).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

Shape = Tuple[int, ...]
Layout = List[Tuple[str, Shape]]

__all__ = [
    "Shape", "Layout", "ACArch", "QArch", "ContinuousArch", "obs_dim", "head_dim", "nature_cnn_out",
    "actor_critic_layout", "dqn_layout", "sac_layout", "td3_layout", "ddpg_layout", "gail_adversary_layout",
    "normalize_net_arch", "candidate_actor_critic_archs", "candidate_q_archs", "candidate_continuous_archs",
]


# ------------------------------------------------------------------------------------------------
# spaces
# ------------------------------------------------------------------------------------------------
def _space_kind(space: Any) -> str:
    return type(space).__name__


def obs_dim(space: Any) -> int:
    """Size of the flattened, pre-processed observation (one-hot for Discrete / MultiDiscrete)."""
    kind = _space_kind(space)
    if kind == "Discrete":
        return int(space.n)
    if kind == "MultiDiscrete":
        return int(np.sum(space.nvec))
    if kind == "MultiBinary":
        return int(np.prod(np.asarray(space.n)))
    return int(np.prod(space.shape))


def head_dim(space: Any) -> int:
    """``n_act`` of the reference: the width of the ``pi`` / ``q`` heads."""
    kind = _space_kind(space)
    if kind == "Discrete":
        return int(space.n)
    if kind == "MultiDiscrete":
        return int(np.sum(space.nvec))
    if kind == "MultiBinary":
        return int(np.prod(np.asarray(space.n)))
    if kind == "Box":
        return int(np.prod(space.shape))
    raise NotImplementedError(f"stable-baselines policies do not support action space {space!r}")


def nature_cnn_out(obs_shape: Sequence[int]) -> int:
    """Flattened size after nature_cnn's three VALID convolutions (before ``fc1``)."""
    if len(obs_shape) != 3:
        raise ValueError(f"CNN policies need image observations (H, W, C), got shape {tuple(obs_shape)}")
    h, w = int(obs_shape[0]), int(obs_shape[1])
    for k, s in ((8, 4), (4, 2), (3, 1)):
        h, w = (h - k) // s + 1, (w - k) // s + 1
    if h < 1 or w < 1:
        raise ValueError(f"Image observations of shape {tuple(obs_shape)} are too small for nature_cnn")
    return h * w * 64


# ------------------------------------------------------------------------------------------------
# layer helpers (section 2)
# ------------------------------------------------------------------------------------------------
def _linear(scope: str, n_in: int, n_out: int) -> Layout:
    return [(f"{scope}/w:0", (n_in, n_out)), (f"{scope}/b:0", (n_out,))]


def _conv(scope: str, k: int, c_in: int, c_out: int) -> Layout:
    return [(f"{scope}/w:0", (k, k, c_in, c_out)), (f"{scope}/b:0", (1, c_out, 1, 1))]


def _nature_cnn(prefix: str, obs_shape: Sequence[int]) -> Layout:
    c = int(obs_shape[2])
    return (_conv(f"{prefix}/c1", 8, c, 32) + _conv(f"{prefix}/c2", 4, 32, 64) + _conv(f"{prefix}/c3", 3, 64, 64)
            + _linear(f"{prefix}/fc1", nature_cnn_out(obs_shape), 512))


def _dense(scope: str, n_in: int, n_out: int) -> Layout:
    return [(f"{scope}/kernel:0", (n_in, n_out)), (f"{scope}/bias:0", (n_out,))]


def _ln_suffix(i: int) -> str:
    return "" if i == 0 else f"_{i}"


def _layer_norm(scope: str, n: int) -> Layout:
    return [(f"{scope}/beta:0", (n,)), (f"{scope}/gamma:0", (n,))]


def _fully_connected(scope: str, n_in: int, n_out: int) -> Layout:
    return [(f"{scope}/weights:0", (n_in, n_out)), (f"{scope}/biases:0", (n_out,))]


# ------------------------------------------------------------------------------------------------
# actor-critic policies (section 4)
# ------------------------------------------------------------------------------------------------
def normalize_net_arch(net_arch: Optional[list], layers: Optional[Sequence[int]]) -> list:
    """SB2 rule: ``net_arch`` wins; ``layers=L`` means ``[dict(pi=L, vf=L)]``; default ``layers=[64, 64]``."""
    if net_arch is not None:
        out: list = []
        for item in net_arch:
            if isinstance(item, dict):
                out.append({"pi": [int(s) for s in item.get("pi", [])], "vf": [int(s) for s in item.get("vf", [])]})
                break
            out.append(item if isinstance(item, str) else int(item))
        return out
    layers = [64, 64] if layers is None else [int(s) for s in layers]
    return [{"pi": list(layers), "vf": list(layers)}]


@dataclass
class ACArch:
    """
    Architecture of an actor-critic policy (``common/policies.py``).

    :param feature: ``"mlp"`` or ``"cnn"``
    :param recurrent: LSTM policy
    :param layer_norm: LnLstm (LSTM layer normalisation)
    :param n_lstm: LSTM units
    :param net_arch: feed-forward: normalised ``net_arch`` (shared ints then ``{"pi", "vf"}``);
        recurrent: ``None`` for the legacy mode, else the ``net_arch`` list with one ``"lstm"`` entry
    :param layers: recurrent legacy mode: the shared ``pi_fc{i}`` sizes
    """

    feature: str = "mlp"
    recurrent: bool = False
    layer_norm: bool = False
    n_lstm: int = 256
    net_arch: Optional[list] = None
    layers: Optional[List[int]] = None

    def policy_name(self) -> str:
        if self.recurrent:
            return f"{'Cnn' if self.feature == 'cnn' else 'Mlp'}{'Ln' if self.layer_norm else ''}LstmPolicy"
        return "CnnPolicy" if self.feature == "cnn" else "MlpPolicy"


def _ac_heads(prefix: str, ac_space: Any, pi_dim: int, vf_dim: int) -> Layout:
    n = head_dim(ac_space)
    layout = _linear(f"{prefix}/vf", vf_dim, 1) + _linear(f"{prefix}/pi", pi_dim, n)
    if _space_kind(ac_space) == "Box":
        layout.append((f"{prefix}/pi/logstd:0", (1, n)))
    return layout + _linear(f"{prefix}/q", vf_dim, n)


def actor_critic_layout(ob_space: Any, ac_space: Any, arch: ACArch, prefix: str = "model") -> Layout:
    """``get_parameter_list()`` of an actor-critic policy under ``prefix`` (section 4.1-4.6)."""
    layout: Layout = []
    if arch.recurrent:
        n = int(arch.n_lstm)
        if arch.net_arch is None:
            if arch.feature == "cnn":
                layout += _nature_cnn(prefix, ob_space.shape)
                in_dim = 512
            else:
                in_dim = obs_dim(ob_space)
                for i, size in enumerate([64, 64] if arch.layers is None else arch.layers):
                    layout += _linear(f"{prefix}/pi_fc{i}", in_dim, int(size))
                    in_dim = int(size)
            layout += _lstm(prefix, in_dim, n, arch.layer_norm)
            return layout + _ac_heads(prefix, ac_space, n, n)
        if arch.feature == "cnn":
            raise NotImplementedError("SB2 does not support net_arch with a CNN LSTM policy")
        in_dim = obs_dim(ob_space)
        pi_sizes: List[int] = []
        vf_sizes: List[int] = []
        for idx, item in enumerate(arch.net_arch):
            if item == "lstm":
                layout += _lstm(prefix, in_dim, n, arch.layer_norm)
                in_dim = n
            elif isinstance(item, dict):
                pi_sizes, vf_sizes = list(item.get("pi", [])), list(item.get("vf", []))
                break
            else:
                layout += _linear(f"{prefix}/shared_fc{idx}", in_dim, int(item))
                in_dim = int(item)
        pi_dim = vf_dim = in_dim
        for i, size in enumerate(pi_sizes):
            layout += _linear(f"{prefix}/pi_fc{i}", pi_dim, int(size))
            pi_dim = int(size)
        for i, size in enumerate(vf_sizes):
            layout += _linear(f"{prefix}/vf_fc{i}", vf_dim, int(size))
            vf_dim = int(size)
        return layout + _ac_heads(prefix, ac_space, pi_dim, vf_dim)
    if arch.feature == "cnn":
        return _nature_cnn(prefix, ob_space.shape) + _ac_heads(prefix, ac_space, 512, 512)
    net_arch = normalize_net_arch(arch.net_arch, None)
    in_dim = obs_dim(ob_space)
    pi_sizes, vf_sizes = [], []
    for idx, item in enumerate(net_arch):
        if isinstance(item, dict):
            pi_sizes, vf_sizes = item["pi"], item["vf"]
            break
        layout += _linear(f"{prefix}/shared_fc{idx}", in_dim, int(item))
        in_dim = int(item)
    pi_dim = vf_dim = in_dim
    for i, (pi_size, vf_size) in enumerate(zip_longest(pi_sizes, vf_sizes)):
        if pi_size is not None:
            layout += _linear(f"{prefix}/pi_fc{i}", pi_dim, int(pi_size))
            pi_dim = int(pi_size)
        if vf_size is not None:
            layout += _linear(f"{prefix}/vf_fc{i}", vf_dim, int(vf_size))
            vf_dim = int(vf_size)
    return layout + _ac_heads(prefix, ac_space, pi_dim, vf_dim)


def _lstm(prefix: str, n_in: int, n: int, layer_norm: bool) -> Layout:
    scope = f"{prefix}/lstm1"
    layout = [(f"{scope}/wx:0", (n_in, 4 * n)), (f"{scope}/wh:0", (n, 4 * n)), (f"{scope}/b:0", (4 * n,))]
    if layer_norm:
        layout += [(f"{scope}/{v}:0", (4 * n,)) for v in ("gx", "bx", "gh", "bh")]
        layout += [(f"{scope}/{v}:0", (n,)) for v in ("gc", "bc")]
    return layout


def gail_adversary_layout(ob_space: Any, ac_space: Any, hidden_size: int = 100) -> Layout:
    """GAIL's discriminator (section 4.5): three ``fully_connected`` layers under ``adversary/``."""
    a_dim = int(ac_space.n) if _space_kind(ac_space) == "Discrete" else head_dim(ac_space)
    n_in = obs_dim(ob_space) + a_dim
    h = int(hidden_size)
    return (_fully_connected("adversary/fully_connected", n_in, h)
            + _fully_connected("adversary/fully_connected_1", h, h)
            + _fully_connected("adversary/fully_connected_2", h, 1))


def _ac_pair_splits(n_pairs: int) -> Iterator[Tuple[int, int, int]]:
    """(shared, pi depth, vf depth) splits of ``n_pairs`` hidden layers, most common first."""
    seen = set()
    ordered = []
    if n_pairs % 2 == 0:
        ordered.append((0, n_pairs // 2, n_pairs // 2))
    for s in range(n_pairs + 1):
        rest = n_pairs - s
        if rest % 2 == 0:
            ordered.append((s, rest // 2, rest // 2))
        for p in range(rest + 1):
            ordered.append((s, p, rest - p))
    for item in ordered:
        if item not in seen:
            seen.add(item)
            yield item


def candidate_actor_critic_archs(ob_space: Any, ac_space: Any, shapes: Sequence[Shape],
                                 base: ACArch) -> Iterator[ACArch]:
    """
    Architectures of the same kind as ``base`` (feed-forward Mlp, LSTM legacy mode) whose hidden sizes are read
    from ``shapes``; the caller keeps the first whose layout matches.
    """
    two_d = [s for s in shapes if len(s) == 2]
    if base.feature == "cnn" and not base.recurrent:
        yield replace(base)
        return
    if base.recurrent:
        for i, s in enumerate(shapes):
            if len(s) == 2 and s[1] % 4 == 0 and i + 1 < len(shapes) and len(shapes[i + 1]) == 2 \
                    and shapes[i + 1] == (s[1] // 4, s[1]):
                n = s[1] // 4
                widths = [w[1] for w in shapes[:i] if len(w) == 2]
                for ln in (base.layer_norm, not base.layer_norm):
                    if base.feature == "cnn":
                        yield replace(base, n_lstm=n, layer_norm=ln)
                    else:
                        yield replace(base, n_lstm=n, layer_norm=ln, layers=list(widths), net_arch=None)
                break
        return
    # feed-forward mlp: hidden (w, b) pairs come before the heads (vf, pi, [logstd], q = 4 or 5 arrays)
    n_head = 7 if _space_kind(ac_space) == "Box" else 6
    n_hidden = len(shapes) - n_head
    if n_hidden < 0 or n_hidden % 2:
        return
    pairs = [shapes[2 * i] for i in range(n_hidden // 2)]
    if any(len(p) != 2 for p in pairs) or len(two_d) < len(pairs):
        return
    for s, p, v in _ac_pair_splits(len(pairs)):
        order = ["shared"] * s
        for i in range(max(p, v)):
            if i < p:
                order.append("pi")
            if i < v:
                order.append("vf")
        sizes = {"shared": [], "pi": [], "vf": []}
        for which, pair in zip(order, pairs):
            sizes[which].append(int(pair[1]))
        yield replace(base, net_arch=sizes["shared"] + [{"pi": sizes["pi"], "vf": sizes["vf"]}])


# ------------------------------------------------------------------------------------------------
# DQN (section 5)
# ------------------------------------------------------------------------------------------------
@dataclass
class QArch:
    """DQN Q-network: ``layers``, ``layer_norm``, ``dueling``, CNN features; ``param_noise`` adds two copies."""

    feature: str = "mlp"
    layers: List[int] = field(default_factory=lambda: [64, 64])
    layer_norm: bool = False
    dueling: bool = True
    param_noise: bool = False

    def policy_name(self) -> str:
        return f"{'Ln' if self.layer_norm else ''}{'Cnn' if self.feature == 'cnn' else 'Mlp'}Policy"


def _fc_name(i: int) -> str:
    return "fully_connected" if i == 0 else f"fully_connected_{i}"


def _q_stream(scope: str, in_dim: int, layers: Sequence[int], layer_norm: bool, n_out: int) -> Layout:
    layout: Layout = []
    for i, size in enumerate(layers):
        layout += _fully_connected(f"{scope}/{_fc_name(i)}", in_dim, int(size))
        if layer_norm:
            layout += _layer_norm(f"{scope}/LayerNorm{_ln_suffix(i)}", int(size))
        in_dim = int(size)
    return layout + _fully_connected(f"{scope}/{_fc_name(len(layers))}", in_dim, n_out)


def _q_func(prefix: str, ob_space: Any, n_actions: int, arch: QArch) -> Layout:
    layout: Layout = []
    if arch.feature == "cnn":
        layout += _nature_cnn(f"{prefix}/action_value", ob_space.shape)
        layout += _fully_connected(f"{prefix}/action_value/fully_connected", 512, n_actions)
        features = 512
    else:
        features = obs_dim(ob_space)
        layout += _q_stream(f"{prefix}/action_value", features, arch.layers, arch.layer_norm, n_actions)
    if arch.dueling:
        layout += _q_stream(f"{prefix}/state_value", features, arch.layers, arch.layer_norm, 1)
    return layout


def dqn_layout(ob_space: Any, ac_space: Any, arch: QArch) -> Layout:
    """``deepq/eps``, ``deepq/model``, [``perturbed_model``, ``adaptive_model``], ``deepq/target_q_func``."""
    n = int(ac_space.n)
    layout: Layout = [("deepq/eps:0", ())]
    layout += _q_func("deepq/model", ob_space, n, arch)
    if arch.param_noise:
        layout += _q_func("deepq/perturbed_model/model", ob_space, n, arch)
        layout += _q_func("deepq/adaptive_model/model", ob_space, n, arch)
    return layout + _q_func("deepq/target_q_func/model", ob_space, n, arch)


def candidate_q_archs(ob_space: Any, ac_space: Any, shapes: Sequence[Shape], base: QArch) -> Iterator[QArch]:
    """DQN architectures whose hidden sizes are read from ``shapes`` (layer norm / dueling / param noise varied)."""
    n = int(ac_space.n)
    widths = []
    for s in shapes[1:]:
        if len(s) == 2:
            if base.feature == "cnn":
                break
            if s[1] == n:
                break
            widths.append(int(s[1]))
    layer_options = [list(base.layers), widths] if base.feature == "cnn" else [widths, list(base.layers)]
    for layers in layer_options:
        for ln in (base.layer_norm, not base.layer_norm):
            for dueling in (base.dueling, not base.dueling):
                for noise in (base.param_noise, not base.param_noise):
                    yield replace(base, layers=list(layers), layer_norm=ln, dueling=dueling, param_noise=noise)


# ------------------------------------------------------------------------------------------------
# SAC / TD3 / DDPG (sections 6-8)
# ------------------------------------------------------------------------------------------------
@dataclass
class ContinuousArch:
    """Policy of SAC / TD3 / DDPG: ``layers``, ``layer_norm``, CNN features, plus algorithm options."""

    feature: str = "mlp"
    layers: List[int] = field(default_factory=lambda: [64, 64])
    layer_norm: bool = False
    learn_ent_coef: bool = False          # SAC: model/log_ent_coef
    param_noise: bool = False             # DDPG: noise/ and noise_adapt/ actor copies
    normalize_observations: bool = False  # DDPG: input/obs_rms
    normalize_returns: bool = False       # DDPG: input/ret_rms

    def policy_name(self) -> str:
        return f"{'Ln' if self.layer_norm else ''}{'Cnn' if self.feature == 'cnn' else 'Mlp'}Policy"


def _mlp(scope: str, in_dim: int, layers: Sequence[int], layer_norm: bool) -> Tuple[Layout, int]:
    layout: Layout = []
    for i, size in enumerate(layers):
        layout += _dense(f"{scope}/fc{i}", in_dim, int(size))
        if layer_norm:
            layout += _layer_norm(f"{scope}/LayerNorm{_ln_suffix(i)}", int(size))
        in_dim = int(size)
    return layout, in_dim


def _features(scope: str, ob_space: Any, arch: ContinuousArch) -> Tuple[Layout, int]:
    if arch.feature == "cnn":
        return _nature_cnn(scope, ob_space.shape), 512
    return [], obs_dim(ob_space)


def _sac_actor(prefix: str, ob_space: Any, n: int, arch: ContinuousArch, log_std: bool) -> Layout:
    layout, in_dim = _features(f"{prefix}/pi", ob_space, arch)
    hidden, last = _mlp(f"{prefix}/pi", in_dim, arch.layers, arch.layer_norm)
    layout += hidden + _dense(f"{prefix}/pi/dense", last, n)
    if log_std:
        layout += _dense(f"{prefix}/pi/dense_1", last, n)
    return layout


def _critics(prefix: str, ob_space: Any, n: int, arch: ContinuousArch, vf: bool, qf: bool) -> Layout:
    scope = f"{prefix}/values_fn"
    layout, in_dim = _features(scope, ob_space, arch)
    if vf:
        hidden, last = _mlp(f"{scope}/vf", in_dim, arch.layers, arch.layer_norm)
        layout += hidden + _dense(f"{scope}/vf/vf", last, 1)
    if qf:
        for q in ("qf1", "qf2"):
            hidden, last = _mlp(f"{scope}/{q}", in_dim + n, arch.layers, arch.layer_norm)
            layout += hidden + _dense(f"{scope}/{q}/{q}", last, 1)
    return layout


def sac_layout(ob_space: Any, ac_space: Any, arch: ContinuousArch) -> Layout:
    """Actor, V, Q1, Q2, [``model/log_ent_coef``], target V (section 6)."""
    n = head_dim(ac_space)
    layout = _sac_actor("model", ob_space, n, arch, log_std=True)
    layout += _critics("model", ob_space, n, arch, vf=True, qf=True)
    if arch.learn_ent_coef:
        layout.append(("model/log_ent_coef:0", ()))
    return layout + _critics("target", ob_space, n, arch, vf=True, qf=False)


def td3_layout(ob_space: Any, ac_space: Any, arch: ContinuousArch) -> Layout:
    """Actor, Q1, Q2, then the same under ``target/`` (section 7)."""
    n = head_dim(ac_space)
    layout: Layout = []
    for prefix in ("model", "target"):
        layout += _sac_actor(prefix, ob_space, n, arch, log_std=False)
        layout += _critics(prefix, ob_space, n, arch, vf=False, qf=True)
    return layout


def _ddpg_actor(prefix: str, ob_space: Any, n: int, arch: ContinuousArch) -> Layout:
    layout, in_dim = _features(f"{prefix}/pi", ob_space, arch)
    hidden, last = _mlp(f"{prefix}/pi", in_dim, arch.layers, arch.layer_norm)
    return layout + hidden + _dense(f"{prefix}/pi/pi", last, n)


def _ddpg_critic(prefix: str, ob_space: Any, n: int, arch: ContinuousArch) -> Layout:
    layout, in_dim = _features(f"{prefix}/qf", ob_space, arch)
    for i, size in enumerate(arch.layers):
        layout += _dense(f"{prefix}/qf/fc{i}", in_dim, int(size))
        if arch.layer_norm:
            layout += _layer_norm(f"{prefix}/qf/LayerNorm{_ln_suffix(i)}", int(size))
        in_dim = int(size) + (n if i == 0 else 0)
    return layout + _dense(f"{prefix}/qf/qf_output", in_dim, 1)


def ddpg_parts(ob_space: Any, ac_space: Any, arch: ContinuousArch) -> Tuple[Layout, Layout, Layout]:
    """(params, target_params, normalisation params) of DDPG (section 8)."""
    n = head_dim(ac_space)
    params = _ddpg_actor("model", ob_space, n, arch) + _ddpg_critic("model", ob_space, n, arch)
    if arch.param_noise:
        params += _ddpg_actor("noise", ob_space, n, arch) + _ddpg_actor("noise_adapt", ob_space, n, arch)
    target = _ddpg_actor("target", ob_space, n, arch) + _ddpg_critic("target", ob_space, n, arch)
    norm: Layout = []
    obs_shape = tuple(int(s) for s in ob_space.shape)
    if arch.normalize_observations:
        norm += [("input/obs_rms/runningsum:0", obs_shape), ("input/obs_rms/runningsumsq:0", obs_shape),
                 ("input/obs_rms/count:0", ())]
    if arch.normalize_returns:
        norm += [("input/ret_rms/runningsum:0", ()), ("input/ret_rms/runningsumsq:0", ()),
                 ("input/ret_rms/count:0", ())]
    return params, target, norm


def ddpg_layout(ob_space: Any, ac_space: Any, arch: ContinuousArch) -> Layout:
    params, target, norm = ddpg_parts(ob_space, ac_space, arch)
    return params + target + norm


def candidate_continuous_archs(ob_space: Any, ac_space: Any, shapes: Sequence[Shape], base: ContinuousArch,
                               algo: str) -> Iterator[ContinuousArch]:
    """SAC/TD3/DDPG architectures whose hidden sizes are read from the actor's leading kernels in ``shapes``."""
    n = head_dim(ac_space)
    widths: List[int] = []
    seen_kernel = False
    for s in shapes:
        if len(s) == 4:
            continue
        if len(s) == 2:
            if base.feature == "cnn" and not seen_kernel and s[1] == 512:
                seen_kernel = True  # the CNN's fc1
                continue
            if s[1] == n:
                break
            widths.append(int(s[1]))
    layer_options = [widths, list(base.layers)]
    flags = [False, True]
    for layers in layer_options:
        for ln in (base.layer_norm, not base.layer_norm):
            if algo == "SAC":
                for ent in (base.learn_ent_coef, not base.learn_ent_coef):
                    yield replace(base, layers=list(layers), layer_norm=ln, learn_ent_coef=ent)
            elif algo == "DDPG":
                for noise in flags:
                    for norm_obs in (base.normalize_observations, not base.normalize_observations):
                        for norm_ret in (base.normalize_returns, not base.normalize_returns):
                            yield replace(base, layers=list(layers), layer_norm=ln, param_noise=noise,
                                          normalize_observations=norm_obs, normalize_returns=norm_ret)
            else:
                yield replace(base, layers=list(layers), layer_norm=ln)
