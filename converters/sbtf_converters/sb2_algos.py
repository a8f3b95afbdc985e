"""One registry entry per stable-baselines 2.x algorithm: how to recognise its files, which ``data`` keys it
saved (2.10) and which stale keys older versions wrote, its SB2 constructor defaults for values that cannot be
restored, its policy families and the parameter layout of each (see :mod:`sbtf_converters.sb2_layouts`).

Adding an algorithm to sbtf needs no change here as long as its sbtf class keeps SB2's parameter names; an
entry's ``to_sbtf_names`` hook is where names are split/merged if an sbtf layout ever differs from SB2's.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from sbtf import algorithms
from sbtf.common.file_errors import ModelDataError, describe_value
from sbtf_converters import sb2_layouts as L
from sbtf_converters.sb2_pickle import LegacyFunction, is_legacy_global

__all__ = ["AlgoSpec", "ALGORITHMS", "PolicyFamily", "FAMILIES", "detect_algorithm", "get_spec", "LayoutContext"]

_COMMON_TAIL = ("verbose", "policy", "observation_space", "action_space", "n_envs", "n_cpu_tf_sess", "seed",
                "_vectorize_action", "policy_kwargs")


@dataclass
class LayoutContext:
    """What a layout depends on besides the policy architecture."""

    observation_space: Any
    action_space: Any
    data: dict


# ------------------------------------------------------------------------------------------------
# policy families
# ------------------------------------------------------------------------------------------------
@dataclass
class PolicyFamily:
    """
    How the policies of one SB2 ``policies`` module map onto an sbtf module, and how to read their
    architecture from the policy class name + ``policy_kwargs`` + data, or from parameter names.
    """

    name: str
    sb2_modules: Tuple[str, ...]
    sbtf_module: str
    policy_names: Tuple[str, ...]
    zoo_policies: Dict[str, Tuple[str, dict]]
    arch_from_policy: Callable[[str, dict, LayoutContext], Any]
    arch_from_names: Callable[[Dict[str, Tuple[int, ...]], Any, LayoutContext], Any]
    candidates: Callable[[Sequence[Tuple[int, ...]], Any, LayoutContext, str], Iterator[Any]]
    policy_for_arch: Callable[[Any, str, dict], Tuple[str, dict]]
    default_arch: Callable[[], Any]


def _kwarg_list(kwargs: dict, key: str, default: Optional[List[int]]) -> Optional[List[int]]:
    value = kwargs.get(key, default)
    return None if value is None else [int(v) for v in value]


# --- actor-critic (common/policies.py) ---------------------------------------------------------
def _ac_arch_from_policy(name: str, kwargs: dict, ctx: LayoutContext) -> L.ACArch:
    recurrent = "Lstm" in name
    if name == "FeedForwardPolicy":
        feature = kwargs.get("feature_extraction", "cnn")
    elif name == "LstmPolicy":
        feature = kwargs.get("feature_extraction", "cnn")
    else:
        feature = "cnn" if name.startswith("Cnn") else "mlp"
    layer_norm = "LnLstm" in name or (name == "LstmPolicy" and bool(kwargs.get("layer_norm", False)))
    if recurrent:
        return L.ACArch(feature=feature, recurrent=True, layer_norm=layer_norm, n_lstm=int(kwargs.get("n_lstm", 256)),
                        net_arch=kwargs.get("net_arch"), layers=_kwarg_list(kwargs, "layers", None))
    return L.ACArch(feature=feature, net_arch=L.normalize_net_arch(kwargs.get("net_arch"),
                                                                    _kwarg_list(kwargs, "layers", None)))


def _ac_arch_from_names(shapes: Dict[str, Tuple[int, ...]], base: L.ACArch, ctx: LayoutContext) -> L.ACArch:
    names = [n for n in shapes if n.startswith("model/")]
    feature = "cnn" if "model/c1/w:0" in shapes else "mlp"

    def sizes(prefix: str) -> List[int]:
        out = []
        i = 0
        while f"model/{prefix}{i}/b:0" in shapes:
            out.append(int(shapes[f"model/{prefix}{i}/b:0"][0]))
            i += 1
        return out

    if "model/lstm1/wh:0" in shapes:
        n = int(shapes["model/lstm1/wh:0"][0])
        ln = "model/lstm1/gx:0" in shapes
        shared = {}
        for name in names:
            if name.startswith("model/shared_fc") and name.endswith("/b:0"):
                shared[int(name[len("model/shared_fc"):-len("/b:0")])] = int(shapes[name][0])
        lstm_pos = names.index("model/lstm1/wx:0")
        pi_before = any(n_.startswith("model/pi_fc") for n_ in names[:lstm_pos])
        if feature == "cnn" or (pi_before and not shared):
            return L.ACArch(feature=feature, recurrent=True, layer_norm=ln, n_lstm=n, net_arch=None,
                            layers=sizes("pi_fc") if feature == "mlp" else None)
        net_arch: list = []
        for idx in range(max(shared) + 2 if shared else 1):
            if idx in shared:
                net_arch.append(shared[idx])
            else:
                net_arch.append("lstm")
                break
        net_arch.append({"pi": sizes("pi_fc"), "vf": sizes("vf_fc")})
        return L.ACArch(feature="mlp", recurrent=True, layer_norm=ln, n_lstm=n, net_arch=net_arch)
    if feature == "cnn":
        return L.ACArch(feature="cnn")
    shared = []
    i = 0
    while f"model/shared_fc{i}/b:0" in shapes:
        shared.append(int(shapes[f"model/shared_fc{i}/b:0"][0]))
        i += 1
    return L.ACArch(feature="mlp", net_arch=shared + [{"pi": sizes("pi_fc"), "vf": sizes("vf_fc")}])


def _ac_candidates(shapes, base, ctx, algo):
    return L.candidate_actor_critic_archs(ctx.observation_space, ctx.action_space, shapes, base)


def _ac_policy_for_arch(arch: L.ACArch, stored_name: str, stored_kwargs: dict) -> Tuple[str, dict]:
    kwargs = {k: v for k, v in stored_kwargs.items() if k not in ("net_arch", "layers", "n_lstm",
                                                                  "feature_extraction", "layer_norm")}
    if arch.recurrent:
        if arch.n_lstm != 256:
            kwargs["n_lstm"] = arch.n_lstm
        if arch.net_arch is not None:
            kwargs["net_arch"] = arch.net_arch
        elif arch.feature == "mlp" and arch.layers is not None and list(arch.layers) != [64, 64]:
            kwargs["layers"] = list(arch.layers)
        return arch.policy_name(), kwargs
    if arch.feature == "mlp" and arch.net_arch != L.normalize_net_arch(None, None):
        kwargs["net_arch"] = arch.net_arch
    return arch.policy_name(), kwargs


ACTOR_CRITIC = PolicyFamily(
    name="actor_critic",
    sb2_modules=("stable_baselines.common.policies", "stable_baselines.a2c.policies",
                 "stable_baselines.ppo2.policies", "stable_baselines.acer.policies",
                 "stable_baselines.acktr.policies", "stable_baselines.ppo1.policies",
                 "stable_baselines.trpo_mpi.policies", "stable_baselines.common"),
    sbtf_module="sbtf.common.policies",
    policy_names=("MlpPolicy", "CnnPolicy", "MlpLstmPolicy", "MlpLnLstmPolicy", "CnnLstmPolicy", "CnnLnLstmPolicy",
                  "FeedForwardPolicy", "LstmPolicy"),
    zoo_policies={"CustomMlpPolicy": ("MlpPolicy", {"net_arch": [{"pi": [16], "vf": [16]}]})},
    arch_from_policy=_ac_arch_from_policy,
    arch_from_names=_ac_arch_from_names,
    candidates=_ac_candidates,
    policy_for_arch=_ac_policy_for_arch,
    default_arch=lambda: L.ACArch(feature="mlp", net_arch=L.normalize_net_arch(None, None)),
)


# --- DQN (deepq/policies.py) ---------------------------------------------------------------------
def _q_arch_from_policy(name: str, kwargs: dict, ctx: LayoutContext) -> L.QArch:
    if name == "FeedForwardPolicy":
        feature = kwargs.get("feature_extraction", "cnn")
        layer_norm = bool(kwargs.get("layer_norm", False))
    else:
        feature = "cnn" if "Cnn" in name else "mlp"
        layer_norm = name.startswith("Ln")
    dueling = True if name.startswith("Ln") else bool(kwargs.get("dueling", True))
    return L.QArch(feature=feature, layers=_kwarg_list(kwargs, "layers", [64, 64]), layer_norm=layer_norm,
                   dueling=dueling, param_noise=bool(ctx.data.get("param_noise", False)))


def _q_arch_from_names(shapes, base: L.QArch, ctx) -> L.QArch:
    prefix = "deepq/model/action_value/"
    feature = "cnn" if prefix + "c1/w:0" in shapes else "mlp"
    widths = []
    i = 0
    while f"{prefix}{L._fc_name(i)}/biases:0" in shapes:
        widths.append(int(shapes[f"{prefix}{L._fc_name(i)}/biases:0"][0]))
        i += 1
    layers = widths[:-1] if feature == "mlp" else list(base.layers)
    if feature == "cnn":
        layers = []
        i = 0
        while f"deepq/model/state_value/{L._fc_name(i)}/biases:0" in shapes:
            layers.append(int(shapes[f"deepq/model/state_value/{L._fc_name(i)}/biases:0"][0]))
            i += 1
        layers = layers[:-1] if layers else list(base.layers)
    return L.QArch(feature=feature, layers=layers,
                   layer_norm=any("/LayerNorm" in n for n in shapes if n.startswith("deepq/model/")),
                   dueling=any(n.startswith("deepq/model/state_value/") for n in shapes),
                   param_noise=any(n.startswith("deepq/perturbed_model/") for n in shapes))


def _q_candidates(shapes, base, ctx, algo):
    return L.candidate_q_archs(ctx.observation_space, ctx.action_space, shapes, base)


def _q_policy_for_arch(arch: L.QArch, stored_name: str, stored_kwargs: dict) -> Tuple[str, dict]:
    kwargs = {k: v for k, v in stored_kwargs.items() if k not in ("layers", "dueling", "layer_norm",
                                                                  "feature_extraction")}
    if list(arch.layers) != [64, 64]:
        kwargs["layers"] = list(arch.layers)
    if not arch.dueling:
        kwargs["dueling"] = False
    return arch.policy_name(), kwargs


DQN_POLICIES = PolicyFamily(
    name="dqn",
    sb2_modules=("stable_baselines.deepq.policies",),
    sbtf_module="sbtf.deepq.policies",
    policy_names=("MlpPolicy", "LnMlpPolicy", "CnnPolicy", "LnCnnPolicy", "FeedForwardPolicy"),
    zoo_policies={"CustomDQNPolicy": ("LnMlpPolicy", {"layers": [64]})},
    arch_from_policy=_q_arch_from_policy,
    arch_from_names=_q_arch_from_names,
    candidates=_q_candidates,
    policy_for_arch=_q_policy_for_arch,
    default_arch=L.QArch,
)


# --- SAC / TD3 / DDPG ---------------------------------------------------------------------------------
def _c_arch_from_policy(name: str, kwargs: dict, ctx: LayoutContext) -> L.ContinuousArch:
    if name == "FeedForwardPolicy":
        feature = kwargs.get("feature_extraction", "cnn")
        layer_norm = bool(kwargs.get("layer_norm", False))
    else:
        feature = "cnn" if "Cnn" in name else "mlp"
        layer_norm = name.startswith("Ln")
    data = ctx.data
    ent = data.get("ent_coef")
    return L.ContinuousArch(
        feature=feature, layers=_kwarg_list(kwargs, "layers", [64, 64]), layer_norm=layer_norm,
        learn_ent_coef=isinstance(ent, str) and ent.startswith("auto"),
        param_noise=data.get("param_noise") is not None and not isinstance(data.get("param_noise"), bool),
        normalize_observations=bool(data.get("normalize_observations", False)),
        normalize_returns=bool(data.get("normalize_returns", False)))


def _c_arch_from_names(shapes, base: L.ContinuousArch, ctx) -> L.ContinuousArch:
    feature = "cnn" if "model/pi/c1/w:0" in shapes else "mlp"
    layers = []
    i = 0
    while f"model/pi/fc{i}/kernel:0" in shapes:
        layers.append(int(shapes[f"model/pi/fc{i}/kernel:0"][1]))
        i += 1
    return replace(base, feature=feature, layers=layers,
                   layer_norm=any(n.startswith("model/pi/LayerNorm") for n in shapes),
                   learn_ent_coef="model/log_ent_coef:0" in shapes,
                   param_noise=any(n.startswith("noise/") for n in shapes),
                   normalize_observations=any(n.startswith("input/obs_rms/") for n in shapes),
                   normalize_returns=any(n.startswith("input/ret_rms/") for n in shapes))


def _c_candidates(shapes, base, ctx, algo):
    return L.candidate_continuous_archs(ctx.observation_space, ctx.action_space, shapes, base, algo)


def _c_policy_for_arch(arch: L.ContinuousArch, stored_name: str, stored_kwargs: dict) -> Tuple[str, dict]:
    kwargs = {k: v for k, v in stored_kwargs.items() if k not in ("layers", "layer_norm", "feature_extraction")}
    if list(arch.layers) != [64, 64]:
        kwargs["layers"] = list(arch.layers)
    return arch.policy_name(), kwargs


def _continuous_family(name: str, module: str, zoo: dict) -> PolicyFamily:
    return PolicyFamily(
        name=name,
        sb2_modules=(f"stable_baselines.{module}.policies",),
        sbtf_module=f"sbtf.{module}.policies",
        policy_names=("MlpPolicy", "LnMlpPolicy", "CnnPolicy", "LnCnnPolicy", "FeedForwardPolicy"),
        zoo_policies=zoo,
        arch_from_policy=_c_arch_from_policy,
        arch_from_names=_c_arch_from_names,
        candidates=_c_candidates,
        policy_for_arch=_c_policy_for_arch,
        default_arch=L.ContinuousArch,
    )


SAC_POLICIES = _continuous_family("sac", "sac", {"CustomSACPolicy": ("MlpPolicy", {"layers": [256, 256]})})
TD3_POLICIES = _continuous_family("td3", "td3", {})
DDPG_POLICIES = _continuous_family("ddpg", "ddpg", {})
FAMILIES = {f.name: f for f in (ACTOR_CRITIC, DQN_POLICIES, SAC_POLICIES, TD3_POLICIES, DDPG_POLICIES)}


# ------------------------------------------------------------------------------------------------
# algorithms
# ------------------------------------------------------------------------------------------------
def _rename_acktr_lam(value: Any, data: dict) -> Tuple[Optional[str], Any, str]:
    """Old ACKTR's ``lam``: a GAE lambda in [0, 1] becomes ``gae_lambda``; other values (-1) meant "no GAE"."""
    if isinstance(value, (int, float)) and 0.0 <= float(value) <= 1.0 and "gae_lambda" not in data:
        return "gae_lambda", float(value), f"renamed 'lam'={value} to 'gae_lambda'"
    return None, None, f"dropped 'lam'={value!r} (not a GAE lambda; gae_lambda stays None as in 2.10)"


def _rename_memory_limit(value: Any, data: dict) -> Tuple[Optional[str], Any, str]:
    if value is not None and "buffer_size" not in data:
        return "buffer_size", int(value), f"'memory_limit'={value} used as 'buffer_size' (as DDPG 2.10 does)"
    return "memory_limit", value, "kept 'memory_limit'"


@dataclass
class AlgoSpec:
    """
    :param name: SB2 / sbtf class name (an entry of the algorithm registry :mod:`sbtf.algorithms`, which says where
        the sbtf class lives)
    :param family: policy family of the saved policy (``None``: the wrapped model's, for HER)
    :param saved_keys: ``data`` keys written by 2.10 ``save()`` (reference 11.1)
    :param marker_keys: keys that only this algorithm writes (file detection)
    :param stale_keys: keys written by older versions, dropped on load (reason)
    :param renames: old key -> ``fn(value, data) -> (new key or None, value, note)``
    :param defaults: values for 2.10 keys that old files lack
    :param sb2_defaults: SB2 2.10 constructor defaults, used when a stored value cannot be rebuilt
    :param layout: ``fn(ctx, arch) -> [(name, shape)]`` SB2 2.10 parameter list
    :param accepts: other file algorithms that this class may load
    """

    name: str
    family: Optional[str]
    saved_keys: Tuple[str, ...]
    marker_keys: Tuple[str, ...]
    stale_keys: Dict[str, str] = field(default_factory=dict)
    renames: Dict[str, Callable] = field(default_factory=dict)
    defaults: Dict[str, Any] = field(default_factory=dict)
    sb2_defaults: Dict[str, Any] = field(default_factory=dict)
    layout: Optional[Callable[[LayoutContext, Any], L.Layout]] = None
    accepts: Tuple[str, ...] = ()
    to_sbtf_names: Optional[Callable[[Dict[str, np.ndarray]], Dict[str, np.ndarray]]] = None

    @property
    def sbtf_module(self) -> str:
        """Where the sbtf class lives (from the algorithm registry :mod:`sbtf.algorithms`)."""
        return algorithms.get(self.name).module

    def sbtf_class(self) -> type:
        """The sbtf class, or raise ImportError saying the algorithm is not in this sbtf yet."""
        try:
            return algorithms.get(self.name).load()
        except algorithms.AlgorithmNotAvailableError as exc:
            raise ImportError(f"{exc}, so this stable-baselines file cannot be loaded yet.") from exc

    def is_available(self) -> bool:
        try:
            self.sbtf_class()
            return True
        except ImportError:
            return False


def _ac_layout(ctx: LayoutContext, arch: L.ACArch) -> L.Layout:
    return L.actor_critic_layout(ctx.observation_space, ctx.action_space, arch)


def _trpo_layout(ctx: LayoutContext, arch: L.ACArch) -> L.Layout:
    layout = L.actor_critic_layout(ctx.observation_space, ctx.action_space, arch)
    return layout + [("oldpi/" + name, shape) for name, shape in layout]


def _gail_layout(ctx: LayoutContext, arch: L.ACArch) -> L.Layout:
    return _trpo_layout(ctx, arch) + L.gail_adversary_layout(
        ctx.observation_space, ctx.action_space, int(ctx.data.get("hidden_size_adversary") or 100))


def _dqn_layout(ctx, arch):
    return L.dqn_layout(ctx.observation_space, ctx.action_space, arch)


def _sac_layout(ctx, arch):
    return L.sac_layout(ctx.observation_space, ctx.action_space, arch)


def _td3_layout(ctx, arch):
    return L.td3_layout(ctx.observation_space, ctx.action_space, arch)


def _ddpg_layout(ctx, arch):
    return L.ddpg_layout(ctx.observation_space, ctx.action_space, arch)


ALGORITHMS: Dict[str, AlgoSpec] = {}


def _register(spec: AlgoSpec) -> None:
    algorithms.get(spec.name)  # every SB2 algorithm is one of sbtf's (KeyError otherwise)
    ALGORITHMS[spec.name] = spec


_register(AlgoSpec(
    name="A2C", family="actor_critic",
    saved_keys=("gamma", "n_steps", "vf_coef", "ent_coef", "max_grad_norm", "learning_rate", "alpha", "epsilon",
                "lr_schedule") + _COMMON_TAIL,
    marker_keys=("alpha", "epsilon"),
    defaults={"policy_kwargs": {}},
    sb2_defaults={"learning_rate": 7e-4},
    layout=_ac_layout))
_register(AlgoSpec(
    name="ACER", family="actor_critic",
    saved_keys=("gamma", "n_steps", "q_coef", "ent_coef", "max_grad_norm", "learning_rate", "lr_schedule",
                "rprop_alpha", "rprop_epsilon", "replay_ratio", "replay_start") + _COMMON_TAIL,
    marker_keys=("q_coef", "rprop_alpha", "rprop_epsilon", "replay_ratio", "replay_start"),
    stale_keys={"num_procs": "removed in 2.10 (n_cpu_tf_sess)"},
    defaults={"policy_kwargs": {}},
    sb2_defaults={"learning_rate": 7e-4},
    layout=_ac_layout))
_register(AlgoSpec(
    name="ACKTR", family="actor_critic",
    saved_keys=("gamma", "gae_lambda", "n_steps", "vf_coef", "ent_coef", "vf_fisher_coef", "max_grad_norm",
                "learning_rate", "kfac_clip", "lr_schedule", "kfac_update") + _COMMON_TAIL,
    marker_keys=("kfac_clip", "vf_fisher_coef", "kfac_update"),
    stale_keys={"nprocs": "removed in 2.10 (n_cpu_tf_sess)"},
    renames={"lam": _rename_acktr_lam},
    defaults={"policy_kwargs": {}, "kfac_update": 1},
    sb2_defaults={"learning_rate": 0.25},
    layout=_ac_layout))
_register(AlgoSpec(
    name="PPO1", family="actor_critic",
    saved_keys=("gamma", "timesteps_per_actorbatch", "clip_param", "entcoeff", "optim_epochs", "optim_stepsize",
                "optim_batchsize", "lam", "adam_epsilon", "schedule") + _COMMON_TAIL,
    marker_keys=("timesteps_per_actorbatch", "clip_param", "optim_epochs", "optim_stepsize", "optim_batchsize"),
    defaults={"policy_kwargs": {}},
    layout=_ac_layout))
_register(AlgoSpec(
    name="PPO2", family="actor_critic",
    saved_keys=("gamma", "n_steps", "vf_coef", "ent_coef", "max_grad_norm", "learning_rate", "lam", "nminibatches",
                "noptepochs", "cliprange", "cliprange_vf") + _COMMON_TAIL,
    marker_keys=("cliprange", "nminibatches", "noptepochs", "cliprange_vf"),
    defaults={"policy_kwargs": {}},
    sb2_defaults={"learning_rate": 2.5e-4, "cliprange": 0.2, "cliprange_vf": None},
    layout=_ac_layout))
_TRPO_KEYS = ("gamma", "timesteps_per_batch", "max_kl", "cg_iters", "lam", "entcoeff", "cg_damping", "vf_stepsize",
              "vf_iters", "hidden_size_adversary", "adversary_entcoeff", "expert_dataset", "g_step", "d_step",
              "d_stepsize", "using_gail") + _COMMON_TAIL
_TRPO_STALE = {"pretrained_weight": "removed before 2.10", "reward_giver": "GAIL internals of old versions",
               "save_per_iter": "removed before 2.10", "checkpoint_dir": "removed before 2.10",
               "task_name": "removed before 2.10"}
_register(AlgoSpec(
    name="TRPO", family="actor_critic", saved_keys=_TRPO_KEYS,
    marker_keys=("max_kl", "cg_iters", "cg_damping", "vf_stepsize", "vf_iters", "timesteps_per_batch"),
    stale_keys=dict(_TRPO_STALE), defaults={"policy_kwargs": {}}, layout=_trpo_layout, accepts=("GAIL",)))
_register(AlgoSpec(
    name="GAIL", family="actor_critic", saved_keys=_TRPO_KEYS,
    marker_keys=("max_kl", "cg_iters", "cg_damping", "vf_stepsize", "vf_iters", "timesteps_per_batch"),
    stale_keys=dict(_TRPO_STALE), defaults={"policy_kwargs": {}}, layout=_gail_layout))
_register(AlgoSpec(
    name="DQN", family="dqn",
    saved_keys=("double_q", "param_noise", "learning_starts", "train_freq", "prioritized_replay",
                "prioritized_replay_eps", "batch_size", "target_network_update_freq", "prioritized_replay_alpha",
                "prioritized_replay_beta0", "prioritized_replay_beta_iters", "exploration_final_eps",
                "exploration_fraction", "learning_rate", "gamma") + _COMMON_TAIL,
    marker_keys=("exploration_fraction", "exploration_final_eps", "target_network_update_freq",
                 "prioritized_replay", "prioritized_replay_alpha", "double_q"),
    stale_keys={"checkpoint_path": "removed in 2.x (use callbacks)", "checkpoint_freq": "removed in 2.x"},
    defaults={"policy_kwargs": {}, "double_q": True},
    sb2_defaults={"learning_rate": 5e-4},
    layout=_dqn_layout))
_register(AlgoSpec(
    name="SAC", family="sac",
    saved_keys=("learning_rate", "buffer_size", "learning_starts", "train_freq", "batch_size", "tau", "ent_coef",
                "target_entropy", "gamma", "action_noise", "random_exploration") + _COMMON_TAIL,
    marker_keys=("target_entropy",),
    defaults={"policy_kwargs": {}},
    sb2_defaults={"learning_rate": 3e-4},
    layout=_sac_layout))
_register(AlgoSpec(
    name="TD3", family="td3",
    saved_keys=("learning_rate", "buffer_size", "learning_starts", "train_freq", "batch_size", "tau",
                "policy_delay", "target_noise_clip", "target_policy_noise", "gamma", "action_noise",
                "random_exploration") + _COMMON_TAIL,
    marker_keys=("policy_delay", "target_noise_clip", "target_policy_noise"),
    defaults={"policy_kwargs": {}},
    sb2_defaults={"learning_rate": 3e-4},
    layout=_td3_layout))
_register(AlgoSpec(
    name="DDPG", family="ddpg",
    saved_keys=("observation_space", "action_space", "nb_eval_steps", "param_noise_adaption_interval",
                "nb_train_steps", "nb_rollout_steps", "verbose", "param_noise", "action_noise", "gamma", "tau",
                "normalize_returns", "enable_popart", "normalize_observations", "batch_size", "observation_range",
                "return_range", "critic_l2_reg", "actor_lr", "critic_lr", "clip_norm", "reward_scale",
                "memory_limit", "buffer_size", "random_exploration", "policy", "n_envs", "n_cpu_tf_sess", "seed",
                "_vectorize_action", "policy_kwargs"),
    marker_keys=("nb_train_steps", "nb_rollout_steps", "nb_eval_steps", "actor_lr", "critic_lr",
                 "param_noise_adaption_interval"),
    stale_keys={"memory_policy": "stable_baselines.ddpg.memory.Memory was removed in 2.6 (replay buffer class)"},
    renames={"memory_limit": _rename_memory_limit},
    defaults={"policy_kwargs": {}},
    layout=_ddpg_layout))
_register(AlgoSpec(
    name="HER", family=None,
    saved_keys=("n_sampled_goal", "goal_selection_strategy", "model_class", "her_obs_space", "her_action_space"),
    marker_keys=("n_sampled_goal", "goal_selection_strategy", "model_class", "her_obs_space"),
    defaults={"policy_kwargs": {}}))

_POLICY_MODULE_ALGOS = {"stable_baselines.deepq.policies": "DQN", "stable_baselines.sac.policies": "SAC",
                        "stable_baselines.td3.policies": "TD3", "stable_baselines.ddpg.policies": "DDPG"}
_ZOO_POLICY_ALGOS = {"CustomDQNPolicy": "DQN", "CustomSACPolicy": "SAC"}


def get_spec(name: str) -> AlgoSpec:
    return ALGORITHMS[name]


def family_of(spec: AlgoSpec, data: dict) -> Tuple[PolicyFamily, AlgoSpec]:
    """The policy family (and the spec whose layout applies: HER -> its wrapped algorithm)."""
    if spec.name == "HER":
        wrapped = wrapped_algorithm(data)
        inner = ALGORITHMS[wrapped]
        return FAMILIES[inner.family], inner
    return FAMILIES[spec.family], spec


def wrapped_algorithm(data: dict) -> str:
    """HER's ``model_class`` as an algorithm name."""
    model_class = data.get("model_class")
    wrappable = algorithms.get("HER").wraps
    name = None
    if is_legacy_global(model_class):
        name = model_class.sb2_name
    elif isinstance(model_class, type):
        name = model_class.__name__
    elif isinstance(model_class, str):
        name = model_class.rsplit(".", 1)[-1].upper() if model_class.upper() in wrappable else \
            model_class.rsplit(".", 1)[-1]
    if name not in wrappable:
        raise ModelDataError(f"This HER file wraps {describe_value(model_class)}; expected "
                             f"{', '.join(wrappable[:-1])} or {wrappable[-1]}.")
    return name


def _policy_ref(data: dict) -> Tuple[Optional[str], Optional[str]]:
    policy = data.get("policy")
    if is_legacy_global(policy):
        return policy.sb2_module, policy.sb2_name
    if isinstance(policy, type):
        return policy.__module__, policy.__name__
    return None, None


def detect_algorithm(data: dict, param_names: Sequence[str]) -> Tuple[Optional[str], str]:
    """
    Which algorithm wrote a file: ``(name, how it was told)``. Data keys that only one algorithm writes are
    the main evidence, then the policy's module (``stable_baselines.sac.policies`` ...), then parameter names.
    """
    keys = set(data)
    her = ALGORITHMS["HER"]
    if sum(k in keys for k in her.marker_keys) >= 2:
        return "HER", f"data keys {sorted(k for k in her.marker_keys if k in keys)}"
    scores = {}
    for name, spec in ALGORITHMS.items():
        if name in ("HER", "GAIL"):
            continue
        score = sum(k in keys for k in spec.marker_keys)
        if score:
            scores[name] = score
    if scores:
        best = max(scores.values())
        winners = [n for n, s in scores.items() if s == best]
        if len(winners) == 1:
            name = winners[0]
            if name == "TRPO" and (bool(data.get("using_gail")) or any(n.startswith("adversary/")
                                                                        for n in param_names)):
                return "GAIL", "TRPO data keys with using_gail=True"
            return name, f"data keys {sorted(k for k in ALGORITHMS[name].marker_keys if k in keys)}"
    module, name = _policy_ref(data)
    if module in _POLICY_MODULE_ALGOS:
        return _POLICY_MODULE_ALGOS[module], f"policy class {module}.{name}"
    if name in _ZOO_POLICY_ALGOS:
        return _ZOO_POLICY_ALGOS[name], f"zoo policy class {module}.{name}"
    names = list(param_names)
    rules = (("deepq/", "DQN"), ("adversary/", "GAIL"), ("oldpi/", "TRPO"), ("model/qf/qf_output", "DDPG"),
             ("model/pi/dense_1", "SAC"), ("model/log_ent_coef", "SAC"), ("target/pi/dense", "TD3"))
    for prefix, algo in rules:
        if any(n.startswith(prefix) for n in names):
            return algo, f"parameter names ({prefix}...)"
    return None, "no distinctive data keys, policy module or parameter names"


def is_schedule_function(value: Any) -> bool:
    return isinstance(value, LegacyFunction)
