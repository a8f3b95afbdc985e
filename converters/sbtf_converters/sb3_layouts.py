"""Where each tensor of a stable-baselines3 / sb3-contrib ``policy.pth`` lands in the sbtf policy.

A layout is a list of rules per policy family. A rule matches SB3 state-dict names with a regular expression and
names the sbtf variable: ``nn.Sequential`` containers (``mlp_extractor.policy_net``, ``q_net.q_net``,
``critic.qf0``...) are renumbered by the order of their ``nn.Linear`` layers (PyTorch counts the activations too:
``0, 2, 4``), the last one becoming ``out`` where sbtf's network has an output layer. PyTorch's ``weight`` is
``(out, in)``, a Keras kernel ``(in, out)``: weights are transposed. Features extractors (NatureCNN's ``cnn.0/2/4``
and ``linear.0``, CombinedExtractor's ``extractors.<key>.``) land in the extractor of the same scope: conv weights
OIHW -> HWIO, the Linear after the flatten with its rows permuted from PyTorch's (C, H, W) flatten to sbtf's
(H, W, C) one; a module SB3 registered twice (``features_extractor`` / ``pi_features_extractor``, a shared
``vf_features_extractor``) is an *alias*, checked equal and loaded once. :func:`plan_state_dict` says where each
tensor goes (with the layout transform, reused for the optimizer state); :func:`map_state_dict` maps a whole state
dict and checks every shape against the model's variable *before* anything is assigned.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from sbtf.common.file_errors import ModelDataError, ParameterShapeError, describe_value

__all__ = ["FAMILIES", "family_of", "map_state_dict", "plan_state_dict", "Target", "unmapped_allowed"]

#: sbtf class name -> policy family of its SB3 layout
FAMILIES: Dict[str, str] = {
    "PPO": "actor_critic", "A2C": "actor_critic", "TRPO": "actor_critic", "MaskablePPO": "actor_critic",
    "DQN": "dqn", "QRDQN": "qrdqn", "SAC": "sac", "TQC": "sac", "TD3": "td3", "DDPG": "td3",
}

# (sequential container regex, sbtf scope, the last Linear is "out", variable style)
_Seq = Tuple[str, str, bool, str]
_SEQUENTIALS: Dict[str, List[_Seq]] = {
    "actor_critic": [(r"mlp_extractor\.policy_net", "model/pi_fc{i}", False, "sb2"),
                     (r"mlp_extractor\.value_net", "model/vf_fc{i}", False, "sb2")],
    "dqn": [(r"q_net\.q_net", "model/q_net/{layer}", True, "torch"),
            (r"q_net_target\.q_net", "model/q_net_target/{layer}", True, "torch")],
    "qrdqn": [(r"quantile_net\.quantile_net", "model/quantile_net/{layer}", True, "torch"),
              (r"quantile_net_target\.quantile_net", "model/quantile_net_target/{layer}", True, "torch")],
    "sac": [(r"actor\.latent_pi", "model/actor/fc{i}", False, "torch"),
            (r"(critic|critic_target)\.(?:qf|quantile_critics\.)(\d+)", "model/{0}/qf{1}/{layer}", True, "torch")],
    "td3": [(r"(actor|actor_target)\.mu", "model/{0}/{layer}", True, "torch"),
            (r"(critic|critic_target)\.qf(\d+)", "model/{0}/qf{1}/{layer}", True, "torch")],
}
# (tensor-name regex, candidate sbtf names; "{p}" is "kernel"/"w" or "bias"/"b" from the matched weight/bias)
_SINGLES: Dict[str, List[Tuple[str, Sequence[str], str]]] = {
    "actor_critic": [(r"action_net\.(weight|bias)", ("model/pi/{p}:0",), "sb2"),
                     (r"value_net\.(weight|bias)", ("model/vf/{p}:0",), "sb2"),
                     (r"log_std", ("model/pi/log_std:0", "model/pi/logstd:0"), "sb2")],
    "sac": [(r"actor\.mu(?:\.0)?\.(weight|bias)", ("model/actor/mu/{p}:0",), "torch"),
            (r"actor\.log_std\.(weight|bias)", ("model/actor/log_std/{p}:0",), "torch"),
            (r"actor\.log_std", ("model/actor/log_std:0",), "torch"),
            (r"log_ent_coef", ("model/log_ent_coef:0",), "torch")],
}
#: sbtf variables a SB3 file has no counterpart of (not used by the SB3 maths: left as built)
_UNMATCHED_OK: Dict[str, str] = {"actor_critic": r"model/q/"}
_STYLE = {"sb2": {"weight": "w", "bias": "b"}, "torch": {"weight": "kernel", "bias": "bias"}}
_TENSOR = re.compile(r"(.*)\.(\d+)\.(weight|bias)$")


def family_of(class_name: str) -> str:
    """The SB3 layout family of an sbtf class (ModelDataError for classes without one)."""
    try:
        return FAMILIES[class_name]
    except KeyError:
        raise ModelDataError(f"sbtf does not know the stable-baselines3 weight layout of {class_name} yet "
                             f"(known: {sorted(FAMILIES)}).") from None


def unmapped_allowed(class_name: str, sbtf_name: str) -> bool:
    """Whether an sbtf variable of ``class_name`` has no SB3 counterpart by design (left as built, e.g. the
    unused ``model/q/`` head of sbtf's actor-critic policies)."""
    allowed = _UNMATCHED_OK.get(family_of(class_name))
    return bool(allowed and re.match(allowed, sbtf_name))


def _sequential_targets(family: str, names: Sequence[str]) -> Dict[str, Tuple[str, bool]]:
    """SB3 name -> (sbtf name, transpose) for the tensors of ``nn.Sequential`` containers."""
    groups: Dict[Tuple[str, _Seq], Dict[int, List[str]]] = {}
    for name in names:
        match = _TENSOR.match(name)
        if match is None:
            continue
        container, index, _ = match.groups()
        for rule in _SEQUENTIALS.get(family, ()):
            found = re.fullmatch(rule[0], container)
            if found:
                groups.setdefault((container, rule), {}).setdefault(int(index), []).append(name)
                break
    out: Dict[str, Tuple[str, bool]] = {}
    for (container, rule), layers in groups.items():
        pattern, scope, last_is_out, style = rule
        captured = re.fullmatch(pattern, container).groups()
        order = sorted(layers)
        for position, index in enumerate(order):
            layer = "out" if last_is_out and position == len(order) - 1 else f"fc{position}"
            prefix = scope.format(*captured, i=position, layer=layer)
            for name in layers[index]:
                kind = name.rsplit(".", 1)[1]
                out[name] = (f"{prefix}/{_STYLE[style][kind]}:0", kind == "weight")
    return out


def _single_target(family: str, name: str, model_names: Mapping[str, object]) -> Optional[Tuple[str, bool]]:
    for pattern, candidates, style in _SINGLES.get(family, ()):
        match = re.fullmatch(pattern, name)
        if match is None:
            continue
        kind = match.group(1) if match.groups() else None
        names = [candidate.format(p=_STYLE[style][kind]) if kind else candidate for candidate in candidates]
        for target in names:
            if target in model_names:
                return target, kind == "weight"
        return names[0], kind == "weight"
    return None


def _fits(stored: tuple, wanted: tuple) -> bool:
    """Same shape, or the same values up to size-1 axes (``log_ent_coef`` (1,) -> (), a Gaussian ``log_std``)."""
    if stored == wanted:
        return True
    return int(np.prod(stored)) == int(np.prod(wanted)) and [d for d in stored if d != 1] == \
        [d for d in wanted if d != 1]


_EXTRACTOR = re.compile(r"(?P<container>(?:.*\.)?(?:pi_|vf_)?features_extractor)\."
                        r"(?:extractors\.(?P<key>[^.]+)\.)?"
                        r"(?P<layer>cnn\.(?P<conv>0|2|4)|linear\.0)\.(?P<kind>weight|bias)$")
_CONV_NAMES = {"0": "c1", "2": "c2", "4": "c3"}


def _conv_kernel(array: np.ndarray) -> np.ndarray:
    """PyTorch's ``Conv2d.weight`` (out, in, h, w) as a channels-last kernel (h, w, in, out)."""
    return np.transpose(array, (2, 3, 1, 0)) if array.ndim == 4 else array


def _flat_linear(channels: int) -> Callable[[np.ndarray], np.ndarray]:
    """The ``nn.Linear`` after NatureCNN's flatten: PyTorch flattens (C, H, W), sbtf (H, W, C): the kernel's rows
    are permuted from channel-major to channel-minor (the spatial index h * W + w is the same in both)."""

    def transform(array: np.ndarray) -> np.ndarray:
        kernel = array.T
        if kernel.ndim != 2 or channels <= 0 or kernel.shape[0] % channels:
            return kernel  # the shape check below reports it
        spatial = kernel.shape[0] // channels
        return kernel.reshape(channels, spatial, -1).transpose(1, 0, 2).reshape(kernel.shape)

    return transform


def _transpose(array: np.ndarray) -> np.ndarray:
    return array.T if array.ndim == 2 else array


def _same(array: np.ndarray) -> np.ndarray:
    return array


class Target(NamedTuple):
    """Where one SB3 tensor lands: the sbtf variable and the function turning the tensor into its layout (the
    same one serves the optimizer's per-parameter state)."""
    name: str
    transform: Callable[[np.ndarray], np.ndarray]


def _extractor_targets(state: Mapping[str, np.ndarray], model_shapes: Mapping[str, object]
                       ) -> Tuple[Dict[str, Target], Dict[str, str]]:
    """
    Targets of the features extractors' tensors (NatureCNN: ``cnn.0/2/4`` and ``linear.0``; CombinedExtractor:
    ``extractors.<key>.`` before them), and the *aliases*: tensors of an extractor module SB3 registers twice
    (``features_extractor`` is ``pi_features_extractor``; with a shared extractor ``vf_features_extractor`` and the
    critic's ``features_extractor`` are the actor's too): alias name -> its scope's relative name, matched later
    against a mapped tensor of equal value.
    """
    prefixes = {name.rsplit("/", 2)[0] for name in model_shapes}
    targets: Dict[str, Target] = {}
    aliases: Dict[str, str] = {}
    for name in state:
        match = _EXTRACTOR.match(name)
        if match is None:
            continue
        container, key, conv, kind = match.group("container", "key", "conv", "kind")
        scope = "model/" + container.replace(".", "/")
        relative = name[len(container) + 1:]
        if not any(prefix == scope or prefix.startswith(scope + "/") for prefix in prefixes):
            aliases[name] = relative
            continue
        layer = _CONV_NAMES[conv] if conv is not None else "fc1"
        sbtf_name = f"{scope}/{key + '/' if key else ''}{layer}/{'w' if kind == 'weight' else 'b'}:0"
        if kind == "bias":
            transform = _same
        elif conv is not None:
            transform = _conv_kernel
        else:
            last_conv = state.get(f"{container}.{'extractors.' + key + '.' if key else ''}cnn.4.weight")
            transform = _flat_linear(int(np.shape(last_conv)[0]) if last_conv is not None else 0)
        targets[name] = Target(sbtf_name, transform)
    return targets, aliases


def plan_state_dict(class_name: str, state: Mapping[str, np.ndarray], model_shapes: Mapping[str, tuple],
                    source: str = "the stable-baselines3 file") -> Tuple[Dict[str, Target], List[str]]:
    """
    Where each tensor of an SB3 state dict lands (nothing is read or checked but names): ``(targets, aliases)``,
    targets SB3 name -> :class:`Target`, aliases the names of tensors SB3 stores twice (checked equal to their
    original by :func:`map_state_dict`, not assigned, not in any optimizer's parameter list).

    :raises ModelDataError: a tensor sbtf does not know where to put
    """
    family = family_of(class_name)
    targets: Dict[str, Target] = {}
    for name, (sbtf_name, transpose) in _sequential_targets(family, list(state)).items():
        targets[name] = Target(sbtf_name, _transpose if transpose else _same)
    extractor_targets, aliases = _extractor_targets(state, model_shapes)
    targets.update(extractor_targets)
    unknown = []
    for name in state:
        if name in targets or name in aliases:
            continue
        single = _single_target(family, name, model_shapes)
        if single is None or single[0] not in model_shapes:
            unknown.append(name)
            continue
        targets[name] = Target(single[0], _transpose if single[1] else _same)
    unknown += [name for name, target in targets.items() if target.name not in model_shapes]
    if unknown:
        raise ModelDataError(f"{source} holds tensors sbtf's {class_name} has no place for: "
                             f"{describe_value(sorted(set(unknown))[:8], 400)} (a custom network or features "
                             "extractor sbtf does not map yet).")
    return targets, list(aliases)


def _check_aliases(aliases: Sequence[str], targets: Mapping[str, Target], state: Mapping[str, np.ndarray],
                   source: str) -> None:
    """Each alias must equal a mapped extractor tensor of the same relative name (SB3 saved one module twice)."""
    for alias in aliases:
        relative = alias[alias.index("features_extractor.") + len("features_extractor."):]
        originals = [name for name in targets if _EXTRACTOR.match(name) and name.endswith(
            "features_extractor." + relative)]
        if not any(np.array_equal(np.asarray(state[alias]), np.asarray(state[name])) for name in originals):
            raise ModelDataError(f"{source}: the tensor {alias} belongs to a features extractor the policy "
                                 "does not have on its own and equals none it has (a shared extractor whose "
                                 "copies differ: the file was edited, or its share_features_extractor setting is "
                                 "not the one it was saved with).")


def map_state_dict(class_name: str, state: Mapping[str, np.ndarray], model_shapes: Mapping[str, tuple],
                   source: str = "the stable-baselines3 file") -> Dict[str, np.ndarray]:
    """
    The sbtf parameters (name -> array, in the model's shapes) of an SB3 state dict.

    :param class_name: the sbtf class (``"PPO"``, ``"SAC"``, ``"QRDQN"``...)
    :param state: SB3 tensor name -> array (``policy.pth`` and ``pytorch_variables.pth`` together)
    :param model_shapes: the built model's parameter name -> shape
    :param source: the file, for messages
    :raises ParameterShapeError: a tensor does not fit the variable it lands in (nothing is assigned)
    :raises ModelDataError: a tensor sbtf does not know where to put, or a model variable the file lacks
    """
    family = family_of(class_name)
    targets, aliases = plan_state_dict(class_name, state, model_shapes, source)
    out: Dict[str, np.ndarray] = {}
    for name, (sbtf_name, transform) in targets.items():
        value = np.asarray(state[name])
        if value.dtype.kind != "f":
            raise ModelDataError(f"{source}: the tensor {name} holds {value.dtype} values, not floats.")
        array = transform(value)
        wanted = tuple(int(d) for d in model_shapes[sbtf_name])
        if not _fits(tuple(array.shape), wanted):
            raise ParameterShapeError(
                f"{source}: the tensor {name} of shape {tuple(value.shape)} does not fit the parameter "
                f"{sbtf_name} of shape {wanted} (the file's policy_kwargs / spaces do not describe its weights, or "
                "the file was edited).", sbtf_name, tuple(array.shape), wanted)
        if sbtf_name in out:
            raise ModelDataError(f"{source} holds two tensors for the parameter {sbtf_name}.")
        out[sbtf_name] = np.array(array.reshape(wanted), dtype=np.float32)  # (ascontiguousarray makes 0-d 1-d)
    _check_aliases(aliases, targets, state, source)
    allowed = _UNMATCHED_OK.get(family)
    missing = [n for n in model_shapes if n not in out and not (allowed and re.match(allowed, n))]
    if missing:
        raise ModelDataError(f"{source} lacks tensors for the {class_name} parameters {missing[:8]}; it is not a "
                             f"{class_name} file of this policy, or it is truncated.")
    return out
