"""The deterministic action graph of each algorithm, for :mod:`sbtf_converters.export`.

:class:`ExportGraph` is what an algorithm contributes to an export (inputs and the TF maths from them to named
outputs); :func:`register_exporter` / :func:`get_export_graph` find it for a model: a builder registered for the
model's class (by class object, ``__name__`` or ``module.qualname``) or the class's ``_export_outputs`` method.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

import gymnasium as gym
import numpy as np

from sbtf.common.envs.dict_obs import layout_of
from sbtf.common.save_util import space_to_dict

__all__ = ["ExportError", "ExportGraph", "register_exporter", "get_export_graph", "HER_FLAT_OBSERVATION"]


class ExportError(ValueError):
    """A model, policy, option or format that cannot be exported; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------------------------
# the deterministic action graph of each algorithm
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class ExportGraph:
    """
    What an algorithm contributes to an export: its inputs and the TF maths from inputs to named outputs.

    :param inputs: ordered ``{name: tf.TensorSpec}``; ``observation`` first (batch dimension None), then for
        recurrent policies ``state`` (batch, state_size) and ``mask`` (batch,)
    :param outputs: ``outputs(**inputs) -> {name: tf.Tensor}``; ``action`` first, with predict's dtype and scaling
    :param descriptions: ``{output name: one-line meaning}`` (written to the export's metadata)
    :param notes: extra JSON-able metadata: ``action`` (how it is computed) and any other key, which is added to
        the export's metadata as is (e.g. HER's ``her`` entry)
    :param observation_inputs: the inputs that carry observations (HER: ``observation``, ``achieved_goal``,
        ``desired_goal``): the ``serving_float`` signature casts all of them
    :param vecnormalize_refused: when set, why VecNormalize statistics cannot be folded into this graph (the error
        message of an export with ``vecnormalize=``)
    """

    inputs: "OrderedDict[str, Any]"
    outputs: Callable[..., Dict[str, Any]]
    descriptions: Dict[str, str] = field(default_factory=dict)
    notes: Dict[str, Any] = field(default_factory=dict)
    observation_inputs: Tuple[str, ...] = ("observation",)
    vecnormalize_refused: Optional[str] = None


_EXPORTERS: "OrderedDict[Union[type, str], Callable[[Any], ExportGraph]]" = OrderedDict()
#: algorithms (class names) that cannot be exported, with the reason (the message of the ExportError)
_NOT_EXPORTABLE: Dict[str, str] = {}


def register_exporter(key: Union[type, str], builder: Callable[[Any], ExportGraph]) -> None:
    """
    Register how models of a class are exported.

    The builder of the most specific class of a model's MRO is used (a class object, its ``__name__`` or its
    ``module.qualname`` may be the key, so that a builder can be registered without importing the algorithm; sbtf's
    own builders use ``module.qualname``, so that ``sbtf.sb3.SAC`` is not taken for stable-baselines 2's
    ``sbtf.sac.sac.SAC``). A model class can instead define ``_export_outputs(self, obs) -> dict`` (feed-forward
    policies: observation in, ``{"action": ..., ...}`` out, TF ops only); a method defined on a more specific class
    than a registered builder wins.

    :param key: (type or str) the model class, its name (e.g. ``"ACER"``) or ``"module.qualname"``
    :param builder: (callable) ``builder(model) -> ExportGraph``
    """
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {builder!r}")
    _EXPORTERS[key] = builder


def get_export_graph(model: Any) -> ExportGraph:
    """
    The :class:`ExportGraph` of a model (see :func:`register_exporter` for how it is found).

    :raises ExportError: when the model's algorithm has no export graph (the message says why)
    """
    if getattr(model, "policy_tf", None) is None:
        raise ExportError(f"the {type(model).__name__} model has no network yet (it was created with "
                          "_init_setup_model=False and never set up); nothing to export")
    graph = _algorithm_graph(model)
    space = vars(model).get("observation_space")
    if getattr(model.policy_tf, "dict_layout", None) is not None and type(space).__name__ == "Dict":
        return _dict_obs_graph(space, graph)
    return graph


def _algorithm_graph(model: Any) -> ExportGraph:
    for klass in type(model).__mro__:
        if "_export_outputs" in vars(klass):
            return _graph_from_method(model)
        for key in (klass, f"{klass.__module__}.{klass.__qualname__}", klass.__name__):
            if key in _EXPORTERS:
                return _EXPORTERS[key](model)
        if klass.__name__ in _NOT_EXPORTABLE:
            raise ExportError(f"cannot export this {type(model).__name__} model: {_NOT_EXPORTABLE[klass.__name__]}")
    raise ExportError(f"cannot export a {type(model).__name__} model: no export graph is registered for it (sbtf "
                      "exports actor-critic models (A2C, ACER, ACKTR, PPO1, PPO2, TRPO, GAIL), DQN, SAC, TD3, "
                      "DDPG and HER over DQN, SAC, TD3 or DDPG); define _export_outputs(obs) on the class or call "
                      "sbtf_converters.export.register_exporter(cls, builder)")


def _dict_obs_graph(space: Any, inner: ExportGraph) -> ExportGraph:
    """
    A model with Dict observations (``MultiInputPolicy``): one named input per key (Box keys in their dtype, uint8
    images stay uint8, other floats float32; Discrete, MultiDiscrete and MultiBinary keys int32), packed in the graph
    into the flat row the policy takes, as ``sbtf.common.envs.dict_obs.DictObsLayout.pack`` does.
    """
    tf = _tf()

    layout = layout_of(space)
    others = [name for name in inner.inputs if name != "observation"]
    clash = [entry.key for entry in layout.entries if entry.key in others]
    if clash:
        raise ExportError(f"cannot export this model: its Dict observation keys {clash} clash with the inputs "
                          f"{others} of its graph")
    inputs = OrderedDict()
    for entry in layout.entries:
        if isinstance(entry.space, gym.spaces.Box):
            dtype = "uint8" if entry.space.dtype == np.uint8 else "float32"
        else:
            dtype = "int32"
        inputs[entry.key] = _spec((None,) + entry.shape, dtype, entry.key)
    for name in others:
        inputs[name] = inner.inputs[name]

    def outputs(**feed):
        parts = [tf.reshape(tf.cast(feed[entry.key], tf.float32), (-1, entry.size)) for entry in layout.entries]
        rest = {name: feed[name] for name in others}
        return inner.outputs(observation=tf.concat(parts, axis=-1), **rest)

    notes = dict(inner.notes)
    notes["dict_observation"] = {"keys": layout.keys, "packing": "each key flattened and cast to float32, "
                                                                 "concatenated in this order"}
    return ExportGraph(inputs, outputs, dict(inner.descriptions), notes, observation_inputs=tuple(layout.keys),
                       vecnormalize_refused="cannot fold VecNormalize statistics into a model with Dict "
                                            "observations; export without vecnormalize and normalise the "
                                            "observations before feeding them")


def _tf():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf


def _spec(shape, dtype, name):
    tf = _tf()
    return tf.TensorSpec(tuple(shape), tf.as_dtype(dtype), name=name)


def _obs_spec(policy) -> Any:
    spec = policy.obs_signature()
    return _spec(spec.shape, spec.dtype, "observation")


def _graph_from_method(model: Any) -> ExportGraph:
    """``model._export_outputs(observation, **extra)``; ``model._export_extra_inputs()`` (when defined) names the
    extra inputs as ``{name: (shape, dtype)}`` (MaskablePPO's ``action_masks``)."""
    policy = model.policy_tf
    inputs = OrderedDict(observation=_obs_spec(policy))
    extra = getattr(model, "_export_extra_inputs", None)
    for name, (shape, dtype) in (extra() if callable(extra) else {}).items():
        inputs[name] = _spec(shape, dtype, name)

    def outputs(observation, **more):
        result = model._export_outputs(observation, **more)  # pylint: disable=protected-access
        if not isinstance(result, Mapping) or "action" not in result:
            raise ExportError(f"{type(model).__name__}._export_outputs must return a dict with an 'action' entry")
        return OrderedDict([("action", result["action"])] + [(k, v) for k, v in result.items() if k != "action"])

    return ExportGraph(inputs, outputs,
                       {"action": "the deterministic action (as predict(deterministic=True))"},
                       {"action": f"{type(model).__name__}._export_outputs"})


def _finite_bounds(space) -> Tuple[np.ndarray, np.ndarray]:
    """Box bounds as float32 with infinities replaced by the float32 limits (same clipping, finite constants)."""
    big = np.finfo(np.float32).max
    low = np.nan_to_num(np.asarray(space.low, np.float32), neginf=-big, posinf=big)
    high = np.nan_to_num(np.asarray(space.high, np.float32), neginf=-big, posinf=big)
    return low.astype(np.float32), high.astype(np.float32)


def _actor_critic_graph(model: Any, include_q: bool = False) -> ExportGraph:
    """
    A2C, ACER, ACKTR, PPO1, PPO2, TRPO, GAIL: the mode of the policy's distribution (Box: clipped).

    With ``include_q`` (ACER) the ``q_values`` head is exported too, and ``value`` is ACER's state value
    ``sum_a pi(a|s) Q(s, a)`` (ACER does not train the value head).
    """
    tf = _tf()

    policy = model.policy_tf
    space = model.action_space
    recurrent = bool(getattr(policy, "recurrent", False))
    inputs = OrderedDict(observation=_obs_spec(policy))
    if recurrent:
        inputs["state"] = _spec((None, int(policy.state_size)), "float32", "state")
        inputs["mask"] = _spec((None,), "float32", "mask")
    descriptions = OrderedDict()
    squash = bool(getattr(policy, "squash_output", False))  # gSDE + squash_output: tanh(mean) rescaled to the bounds
    if isinstance(space, gym.spaces.Box) and squash:
        descriptions["action"] = "tanh(Gaussian mean) rescaled from [-1, 1] to the action space bounds (float32)"
        note = "low + 0.5 * (tanh(mean) + 1) * (high - low)"
    elif isinstance(space, gym.spaces.Box):
        low, high = _finite_bounds(space)
        descriptions["action"] = "Gaussian mean clipped to the action space bounds (float32)"
        note = "mean of the diagonal Gaussian, clipped to [low, high]"
    elif isinstance(space, gym.spaces.Discrete):
        descriptions["action"] = "argmax of the logits (int64; int32 in TF.js)"
        note = "argmax(logits)"
    elif isinstance(space, gym.spaces.MultiDiscrete):
        descriptions["action"] = "argmax of each component's logits (int64; int32 in TF.js)"
        note = "per-component argmax(logits)"
    elif isinstance(space, gym.spaces.MultiBinary):
        descriptions["action"] = "round(sigmoid(logits)) (float32)"
        note = "round(sigmoid(logits))"
    else:
        raise ExportError(f"cannot export a {type(model).__name__} model with action space {space!r}")

    def outputs(observation, state=None, mask=None):
        flat, value, q_values, new_state = policy.forward(observation, state, mask, n_steps=1)
        dist = policy.proba_distribution_from_flat(flat)
        action = dist.mode()
        out = OrderedDict()
        if isinstance(space, gym.spaces.Box):
            if squash:  # the distribution's mode is tanh(mean) already
                out["action"] = _unscale(model, action)
            else:  # a multi-dimensional Box (RecurrentPPO): the flat Gaussian's mode in the space's shape
                action = tf.reshape(action, (-1,) + tuple(space.shape))
                out["action"] = tf.minimum(tf.maximum(action, tf.constant(low)), tf.constant(high))
            mean, logstd = tf.split(flat, 2, axis=-1)
            out["mean"] = mean
            out["std"] = tf.exp(logstd)
        elif isinstance(space, gym.spaces.Discrete):
            out["action"] = action
            out["logits"] = flat
            out["probabilities"] = tf.nn.softmax(flat, axis=-1)
        elif isinstance(space, gym.spaces.MultiDiscrete):
            out["action"] = action
            out["logits"] = flat
            parts = tf.split(flat, [int(n) for n in np.asarray(space.nvec).ravel()], axis=-1)
            out["probabilities"] = tf.concat([tf.nn.softmax(p, axis=-1) for p in parts], axis=-1)
        else:
            out["action"] = action
            out["logits"] = flat
            out["probabilities"] = tf.sigmoid(flat)
        if include_q:
            out["value"] = tf.reduce_sum(tf.nn.softmax(flat, axis=-1) * q_values, axis=-1)
            out["q_values"] = q_values
        else:
            out["value"] = value
        if recurrent:
            out["state"] = new_state
        return out

    if isinstance(space, gym.spaces.Box):
        descriptions["mean"] = "Gaussian mean (before the tanh squashing)" if squash else \
            "Gaussian mean (before clipping)"
        descriptions["std"] = "Gaussian standard deviation"
    else:
        descriptions["logits"] = "flat distribution parameters (logits)"
        descriptions["probabilities"] = ("softmax of the logits" if not isinstance(space, gym.spaces.MultiDiscrete)
                                         else "softmax of each component's logits, concatenated")
        if isinstance(space, gym.spaces.MultiBinary):
            descriptions["probabilities"] = "sigmoid of the logits"
    descriptions["value"] = "state-value estimate V(s)"
    if include_q:
        descriptions["value"] = "state value V(s) = sum_a pi(a|s) Q(s, a) (ACER)"
        descriptions["q_values"] = "Q(s, a) for every action"
    if recurrent:
        descriptions["state"] = "the next LSTM state (concat[c, h]); feed it back with mask = done flags"
    return ExportGraph(inputs, outputs, descriptions, {"action": note})


def _dqn_graph(model: Any) -> ExportGraph:
    tf = _tf()
    q_net = model.q_net

    def outputs(observation):
        q_values = q_net.q_values(observation)
        return OrderedDict(action=tf.argmax(q_values, axis=1), q_values=q_values)

    return ExportGraph(OrderedDict(observation=_obs_spec(q_net)), outputs,
                       OrderedDict(action="argmax of the Q-values (int64; int32 in TF.js)",
                                   q_values="Q(s, a) for every action"),
                       {"action": "argmax(Q)"})


def _unscale(model: Any, scaled):
    """``low + 0.5 * (scaled + 1) * (high - low)`` (SB2's ``unscale_action``) in TF."""
    tf = _tf()
    low = np.asarray(model.action_space.low, np.float32)
    high = np.asarray(model.action_space.high, np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ExportError(f"cannot export a {type(model).__name__} model whose action space has infinite bounds "
                          f"({model.action_space!r}): its actions are rescaled from [-1, 1] to the bounds")
    return tf.constant(low) + 0.5 * (scaled + 1.0) * tf.constant(high - low)


def _sac_graph(model: Any) -> ExportGraph:
    tf = _tf()
    policy = model.policy_tf
    has_vf = "vf" in getattr(policy, "critic_heads", {})

    def outputs(observation):
        mu_, log_std = policy.actor_mu_log_std(observation)
        out = OrderedDict(action=_unscale(model, tf.tanh(mu_)))
        out["mean"] = mu_
        out["std"] = tf.exp(log_std)
        if has_vf:
            out["value"] = policy.critic("vf", policy.critic_features(observation))[:, 0]
        return out

    descriptions = OrderedDict(action="unscale(tanh(mu)) in the action space bounds (float32)",
                               mean="mean mu of the Gaussian before the tanh squashing",
                               std="standard deviation of the Gaussian before the tanh squashing")
    if has_vf:
        descriptions["value"] = "state-value estimate V(s) (SAC's value function)"
    return ExportGraph(OrderedDict(observation=_obs_spec(policy)), outputs, descriptions,
                       {"action": "low + 0.5 * (tanh(mu) + 1) * (high - low)"})


def _td3_graph(model: Any) -> ExportGraph:
    policy = model.policy_tf

    def outputs(observation):
        return OrderedDict(action=_unscale(model, policy.actor(observation)))

    return ExportGraph(OrderedDict(observation=_obs_spec(policy)), outputs,
                       OrderedDict(action="unscale(actor(obs)) in the action space bounds (float32)"),
                       {"action": "low + 0.5 * (actor(obs) + 1) * (high - low)"})


#: the flat observation a HER model's wrapped model sees (``sbtf.her.utils.KEY_ORDER``)
HER_FLAT_OBSERVATION = "concat[observation, achieved_goal, desired_goal]"
_HER_VECNORMALIZE_REFUSED = (
    "cannot fold VecNormalize statistics into a HER model: HER trains without VecNormalize (it refuses "
    "VecEnvWrappers), so its networks take the goal env's observations as they are; export without vecnormalize "
    "(DDPG's own normalize_observations statistics are folded in automatically)")


def _her_graph(model: Any) -> ExportGraph:
    """
    HER over DQN, SAC, TD3 or DDPG: the goal env's dict observation as three inputs (``observation``,
    ``achieved_goal``, ``desired_goal``), flattened in the graph as ``HERGoalEnvWrapper.convert_dict_to_obs`` does
    (``concat`` in ``KEY_ORDER``; Discrete goal spaces: stacked into the ``MultiDiscrete`` triple; MultiBinary: cast
    to integers and back, as the wrapper's int8 cast), then the wrapped model's export graph.
    """
    from sbtf.her.utils import KEY_ORDER, GoalObsConverter  # pylint: disable=import-outside-toplevel
    tf = _tf()

    inner = vars(model).get("model")
    if inner is None:
        raise ExportError("cannot export this HER model: it has no wrapped model (model.model is None)")
    dict_space = vars(model).get("observation_space")
    instead = (f"export the wrapped {type(inner).__name__} model instead (model.model.export(...)), whose input is "
               f"the flat observation {HER_FLAT_OBSERVATION}")
    if dict_space is None:
        raise ExportError("cannot export this HER model: it does not record its goal env's dict observation space "
                          "(her_obs_space), so the sizes of observation, achieved_goal and desired_goal are unknown; "
                          f"set model.observation_space to the goal env's observation space, or {instead}")
    try:
        converter = GoalObsConverter(dict_space)
    except (ValueError, NotImplementedError) as exc:
        raise ExportError(f"cannot export this HER model: {exc}; {instead}") from exc
    inner_graph = get_export_graph(inner)
    if list(inner_graph.inputs) != ["observation"]:
        raise ExportError(f"cannot export this HER model: the wrapped {type(inner).__name__} model's export takes "
                          f"{list(inner_graph.inputs)}, HER only knows how to feed 'observation'")
    inner_spec = inner_graph.inputs["observation"]
    flat_space = converter.observation_space
    if tuple(inner_spec.shape[1:]) != tuple(flat_space.shape):
        raise ExportError(f"cannot export this HER model: its wrapped {type(inner).__name__} model takes "
                          f"observations of shape {tuple(inner_spec.shape[1:])}, but {HER_FLAT_OBSERVATION} of the "
                          f"goal observation space {dict_space} has shape {tuple(flat_space.shape)}")
    flat_dtype = inner_spec.dtype
    discrete = isinstance(converter.spaces[0], gym.spaces.Discrete)
    multibinary = isinstance(converter.spaces[0], gym.spaces.MultiBinary)
    inputs = OrderedDict()
    part_sizes = []
    for key, space in zip(KEY_ORDER, converter.spaces):
        if discrete:
            inputs[key] = _spec((None,), flat_dtype, key)
            part_sizes.append(None)
        else:
            inputs[key] = _spec((None,) + tuple(int(d) for d in space.shape), "float32", key)
            part_sizes.append(None if len(space.shape) == 1 else int(np.prod(space.shape)))

    def outputs(observation, achieved_goal, desired_goal):
        parts = [observation, achieved_goal, desired_goal]
        if discrete:  # convert_dict_to_obs: MultiDiscrete([n_obs, n_goal, n_goal]) rows
            flat = tf.stack([tf.cast(part, flat_dtype) for part in parts], axis=-1)
        else:
            parts = [part if size is None else tf.reshape(part, (-1, size)) for part, size in zip(parts, part_sizes)]
            if multibinary:  # the wrapper casts MultiBinary observations to int8 (values 0 / 1)
                parts = [tf.cast(tf.cast(part, tf.int32), tf.float32) for part in parts]
            flat = tf.cast(tf.concat(parts, axis=-1), flat_dtype)
        return inner_graph.outputs(observation=flat)

    kind = "stacked (MultiDiscrete)" if discrete else "concatenated"
    descriptions = OrderedDict(inner_graph.descriptions)
    notes = dict(inner_graph.notes)
    notes["action"] = f"{type(inner).__name__} on {HER_FLAT_OBSERVATION}: {inner_graph.notes.get('action', '')}"
    notes["her"] = {"wrapped_algo": type(inner).__name__, "flat_observation": HER_FLAT_OBSERVATION,
                    "flattening": kind, "flat_observation_space": _json_space(flat_space)}
    return ExportGraph(inputs, outputs, descriptions, notes, observation_inputs=tuple(KEY_ORDER),
                       vecnormalize_refused=_HER_VECNORMALIZE_REFUSED)


def _json_space(space: Any) -> Any:
    try:
        return _json_safe(space_to_dict(space))
    except TypeError:
        return repr(space)


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


# stable-baselines 2's classes by module and name: sbtf.sb3's / sbtf.contrib's classes of the same name (SAC, TD3,
# DQN) are other algorithms, exported through their own _export_outputs or the actor-critic base class
register_exporter("sbtf.common.base_class.ActorCriticRLModel", _actor_critic_graph)
register_exporter("sbtf.acer.acer_simple.ACER", lambda model: _actor_critic_graph(model, include_q=True))
register_exporter("sbtf.deepq.dqn.DQN", _dqn_graph)
register_exporter("sbtf.sac.sac.SAC", _sac_graph)
register_exporter("sbtf.td3.td3.TD3", _td3_graph)
register_exporter("sbtf.her.her.HER", _her_graph)
# DDPG defines DDPG._export_outputs itself (the actor on its normalised observations, unscaled)


