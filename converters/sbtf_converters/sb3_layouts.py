"""Where each tensor of a stable-baselines3 / sb3-contrib ``policy.pth`` lands in the sbtf policy.

A layout is a list of rules per policy family. A rule matches SB3 state-dict names with a regular expression and
names the sbtf variable: ``nn.Sequential`` containers (``mlp_extractor.policy_net``, ``q_net.q_net``,
``critic.qf0``...) are renumbered by the order of their ``nn.Linear`` layers (PyTorch counts the activations too:
``0, 2, 4``), the last one becoming ``out`` where sbtf's network has an output layer. PyTorch's ``weight`` is
``(out, in)``, a Keras kernel ``(in, out)``: weights are transposed. :func:`map_state_dict` maps a whole state dict
and checks every shape against the model's variable *before* anything is assigned.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from sbtf.common.file_errors import ModelDataError, ParameterShapeError, describe_value

__all__ = ["FAMILIES", "family_of", "map_state_dict"]

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
    targets = _sequential_targets(family, list(state))
    out: Dict[str, np.ndarray] = {}
    unknown = []
    for name, value in state.items():
        target = targets.get(name) or _single_target(family, name, model_shapes)
        if target is None:
            unknown.append(name)
            continue
        sbtf_name, transpose = target
        array = np.asarray(value)
        if transpose and array.ndim == 2:
            array = array.T
        if sbtf_name not in model_shapes:
            unknown.append(name)
            continue
        wanted = tuple(int(d) for d in model_shapes[sbtf_name])
        if not _fits(tuple(array.shape), wanted):
            raise ParameterShapeError(
                f"{source}: the tensor {name} of shape {tuple(np.asarray(value).shape)} does not fit the parameter "
                f"{sbtf_name} of shape {wanted} (the file's policy_kwargs / spaces do not describe its weights, or "
                "the file was edited).", sbtf_name, tuple(array.shape), wanted)
        if sbtf_name in out:
            raise ModelDataError(f"{source} holds two tensors for the parameter {sbtf_name}.")
        if array.dtype.kind != "f":
            raise ModelDataError(f"{source}: the tensor {name} holds {array.dtype} values, not floats.")
        out[sbtf_name] = np.array(array.reshape(wanted), dtype=np.float32)  # (ascontiguousarray makes 0-d 1-d)
    if unknown:
        raise ModelDataError(f"{source} holds tensors sbtf's {class_name} has no place for: "
                             f"{describe_value(sorted(unknown)[:8], 400)} (a custom network or features extractor "
                             "sbtf does not map yet).")
    allowed = _UNMATCHED_OK.get(family)
    missing = [n for n in model_shapes if n not in out and not (allowed and re.match(allowed, n))]
    if missing:
        raise ModelDataError(f"{source} lacks tensors for the {class_name} parameters {missing[:8]}; it is not a "
                             f"{class_name} file of this policy, or it is truncated.")
    return out
