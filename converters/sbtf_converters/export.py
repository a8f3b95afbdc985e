"""Export sbtf policies for deployment: TensorFlow SavedModel, TF.js graph model (+ a browser demo) and ONNX.

Entry points
* :func:`export_model` (also ``model.export(path, format=...)``) -- write one format;
* :func:`build_export_module` -- the ``tf.Module`` whose ``serve`` function is what every format contains;
* :func:`write_demo` -- a ready-to-serve web folder (CartPole page + the TF.js model + the vendored tfjs bundle);
* :func:`register_exporter` -- how an algorithm plugs in its *deterministic action graph*;
* :func:`register_cli` / :func:`run_cli` / :func:`run_command` -- the ``export`` command (``sbtf export`` through
  :mod:`sbtf_converters.cli_plugin`, or ``python -m sbtf_converters.export``).

The exported function maps a batch of observations to a dict of named outputs. ``action`` is always there and is
what ``model.predict(obs, deterministic=True)`` returns (same dtype, same scaling): the distribution mode of
actor-critic models with Box actions clipped to the action bounds (``unscale(tanh(mean))`` for gSDE policies with
``squash_output=True``), ``argmax Q`` for DQN, ``unscale(tanh(mu))`` for
SAC, ``unscale(actor(obs))`` for TD3 and DDPG (DDPG's observation normalisation included). Extra outputs where the
model has them: ``logits`` / ``probabilities`` (categorical and Bernoulli policies), ``mean`` / ``std`` (Gaussian
policies, before clipping), ``value``, ``q_values``, and ``state`` for recurrent policies (which also take ``state``
and ``mask`` inputs). HER models take their goal env's dict observation as three inputs, ``observation``,
``achieved_goal`` and ``desired_goal``, concatenated inside the graph as ``HERGoalEnvWrapper`` does, and return the
wrapped model's outputs.
See ``docs/export.md``.

Only TensorFlow is imported at module import; ``tf2onnx``/``onnx`` and ``tensorflowjs`` (the ``export`` extra) are
imported when a format needs them, with an error that says how to install them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np

from sbtf import __version__ as sbtf_version
from sbtf import algorithms
from sbtf.common import save_util
from sbtf.common.envs.dict_obs import layout_of
from sbtf.common.save_util import space_to_dict
from sbtf.common.vec_env import VecNormalize
from sbtf_converters.legacy import parse_sb2

__all__ = [
    "FORMATS", "DEFAULT_OPSET", "ExportError", "ExportGraph", "ExportBundle", "export_model", "build_export_module",
    "register_exporter", "get_export_graph", "load_vecnormalize_stats", "write_demo", "find_tfjs_bundle",
    "web_source_dir", "register_cli", "run_cli", "run_command", "add_cli_arguments", "CommandError", "main",
]

#: the formats :func:`export_model` writes
FORMATS = ("savedmodel", "tfjs", "onnx")
#: ONNX opset written by default: 17 is supported by tf2onnx 1.17 (1..18), onnxruntime >= 1.13 and
#: onnxruntime-web, and has every op sbtf policies need (Softmax, Tanh, Clip, Conv, ArgMax, LayerNormalization is
#: not used: sbtf's layer norm is written with basic ops).
DEFAULT_OPSET = 17
#: ONNX names of outputs that share their name with an input in the other formats
ONNX_OUTPUT_RENAMES = {"state": "next_state"}
#: name of the JSON file describing an export (inputs, outputs, spaces, VecNormalize folding)
METADATA_FILE = "sbtf_export.json"
METADATA_FORMAT = "sbtf-export"
METADATA_VERSION = 1
#: the files of the browser demo copied by :func:`write_demo`
DEMO_FILES = ("index.html", "cartpole.js", "policy.js")
_EXTRA_HINT = "pip install 'sbtf[export]' (see docs/export.md for the versions that work together)"


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

    The builder of the most specific class of a model's MRO is used (a class object or its ``__name__`` may be the
    key, so that a builder can be registered without importing the algorithm). A model class can instead define
    ``_export_outputs(self, obs) -> dict`` (feed-forward policies: observation in, ``{"action": ..., ...}`` out,
    TF ops only); a method defined on a more specific class than a registered builder wins.

    :param key: (type or str) the model class, or its name (e.g. ``"ACER"``)
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
        for key in (klass, klass.__name__):
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


register_exporter("ActorCriticRLModel", _actor_critic_graph)
register_exporter("ACER", lambda model: _actor_critic_graph(model, include_q=True))
register_exporter("DQN", _dqn_graph)
register_exporter("SAC", _sac_graph)
register_exporter("TD3", _td3_graph)
register_exporter("HER", _her_graph)
# DDPG defines DDPG._export_outputs itself (the actor on its normalised observations, unscaled)


# ---------------------------------------------------------------------------------------------------------------
# VecNormalize folding
# ---------------------------------------------------------------------------------------------------------------
class _SpacesOnlyVecEnv:
    """Just enough of a VecEnv for ``VecNormalize.load`` to check shapes (never stepped)."""

    def __init__(self, observation_space, action_space):
        self.num_envs = 1
        self.observation_space = observation_space
        self.action_space = action_space


def load_vecnormalize_stats(vecnormalize: Any, observation_space: Any = None) -> Dict[str, Any]:
    """
    Observation statistics to fold into an export: ``{mean, var, epsilon, clip_obs, norm_obs}``.

    :param vecnormalize: a ``VecNormalize`` (or any object with ``obs_rms``, ``epsilon``, ``clip_obs``), a path to
        a file written by ``VecNormalize.save`` (sbtf, stable-baselines 2 >= 2.9 or stable-baselines3), or a folder
        holding ``vecnormalize.pkl`` or an SB2 ``obs_rms.pkl``
    :param observation_space: the model's observation space (checked against the statistics)
    """
    if isinstance(vecnormalize, (str, os.PathLike)):
        vecnormalize = _read_vecnormalize_path(os.fspath(vecnormalize), observation_space)
    obs_rms = getattr(vecnormalize, "obs_rms", None)
    if obs_rms is None or not hasattr(obs_rms, "mean") or not hasattr(obs_rms, "var"):
        raise ExportError(f"vecnormalize must be a VecNormalize, a path to saved VecNormalize statistics or a folder "
                          f"holding them; got {type(vecnormalize).__name__} (no obs_rms statistics)")
    stats = {"mean": np.asarray(obs_rms.mean, np.float64), "var": np.asarray(obs_rms.var, np.float64),
             "epsilon": float(getattr(vecnormalize, "epsilon", 1e-8)),
             "clip_obs": float(getattr(vecnormalize, "clip_obs", 10.0)),
             "norm_obs": bool(getattr(vecnormalize, "norm_obs", True))}
    if observation_space is not None and getattr(observation_space, "shape", None) is not None:
        if tuple(stats["mean"].shape) != tuple(observation_space.shape):
            raise ExportError(f"the VecNormalize statistics are for observations of shape {stats['mean'].shape}, but "
                              f"the model's observations have shape {observation_space.shape}")
    return stats


def _read_vecnormalize_path(path: str, observation_space: Any) -> Any:
    if os.path.isdir(path):
        for name in ("vecnormalize.pkl", "obs_rms.pkl"):
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                path = candidate
                break
        else:
            raise ExportError(f"the folder {path} holds neither vecnormalize.pkl nor obs_rms.pkl")
    if not os.path.isfile(path):
        raise ExportError(f"VecNormalize statistics file {path} not found")
    if os.path.basename(path) == "obs_rms.pkl":  # SB2 < 2.9: a RunningMeanStd pickle (+ ret_rms.pkl beside it)
        from sbtf_converters.legacy import read_running_mean_std  # pylint: disable=import-outside-toplevel

        class _Stats:  # pylint: disable=too-few-public-methods
            obs_rms = read_running_mean_std(path)
            epsilon, clip_obs, norm_obs = 1e-8, 10.0, True

        return _Stats()
    if observation_space is None:
        raise ExportError("reading VecNormalize statistics from a file needs the model's observation space")
    stub = _SpacesOnlyVecEnv(observation_space, gym.spaces.Discrete(2))
    try:
        return VecNormalize.load(path, stub)
    except ValueError as exc:
        raise ExportError(f"cannot fold VecNormalize statistics from {path}: {exc}") from exc


# ---------------------------------------------------------------------------------------------------------------
# the module every format is made from
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class ExportBundle:
    """
    What every format is written from.

    :param module: a ``tf.Module`` that tracks the variables ``serve`` reads (what a SavedModel saves)
    :param serve: ``tf.function`` with a fixed input signature: inputs -> ordered ``{name: tensor}``
    :param extra_signatures: ``{signature name: tf.function}`` also written to SavedModels (``serving_float``)
    :param input_specs: ordered ``{input name: tf.TensorSpec}``
    :param metadata: JSON-able description (what :data:`METADATA_FILE` holds)
    :param fn: the Python function ``serve`` compiles (``fn(*inputs in input_specs order) -> {name: tensor}``)
    """

    module: Any
    serve: Any
    extra_signatures: Dict[str, Any]
    input_specs: "OrderedDict[str, Any]"
    metadata: Dict[str, Any]
    fn: Callable[..., Dict[str, Any]]


def build_export_module(model: Any, vecnormalize: Any = None) -> ExportBundle:
    """
    The :class:`ExportBundle` of a model: the ``serve`` function (observations -> named outputs) and what describes
    it.

    :param model: an sbtf model (``BaseRLModel``)
    :param vecnormalize: VecNormalize statistics to fold into the graph (see :func:`load_vecnormalize_stats`):
        the exported model then takes raw observations
    """
    tf = _tf()

    flush = getattr(model, "_flush_stats", None)
    if callable(flush):  # statistics kept in NumPy between train calls (DDPG's obs_rms) -> their TF variables
        flush()
    graph = get_export_graph(model)
    specs = OrderedDict(graph.inputs)
    policy_obs_dtype = specs["observation"].dtype if "observation" in specs else None
    stats = None
    if vecnormalize is not None and graph.vecnormalize_refused:
        raise ExportError(graph.vecnormalize_refused)
    if vecnormalize is not None:
        stats = load_vecnormalize_stats(vecnormalize, model.observation_space)
        if not isinstance(model.observation_space, gym.spaces.Box):
            raise ExportError(f"cannot fold VecNormalize statistics for a {type(model.observation_space).__name__} "
                              "observation space: only Box observations are normalised")
        if policy_obs_dtype != tf.float32:
            raise ExportError(f"cannot fold VecNormalize statistics into a policy that takes {policy_obs_dtype.name} "
                              "observations (image policies take uint8 pixels, normalised observations are floats)")
        if not stats["norm_obs"]:
            stats = None  # norm_obs=False: VecNormalize passes observations through
    if stats is not None:
        mean = stats["mean"].astype(np.float32)
        std = np.sqrt(stats["var"] + stats["epsilon"]).astype(np.float32)
        clip = np.float32(stats["clip_obs"])

    names = list(specs)

    def serve_impl(*args):
        feed = dict(zip(names, args))
        if stats is not None:
            feed["observation"] = tf.clip_by_value((feed["observation"] - tf.constant(mean)) / tf.constant(std),
                                                   -clip, clip)
        outputs = graph.outputs(**feed)
        if "action" not in outputs:
            raise ExportError("the export graph of {} has no 'action' output".format(type(model).__name__))
        return OrderedDict((key, tf.identity(value, name=key)) for key, value in outputs.items())

    serve = tf.function(serve_impl, input_signature=list(specs.values()), autograph=False)
    concrete = serve.get_concrete_function()
    structured = concrete.structured_outputs
    # the SavedModel root tracks exactly the variables the function reads (not the Keras models, whose caches of
    # compiled functions are not saveable)
    module = tf.Module(name="sbtf_export")
    module.policy_variables = list(concrete.variables)

    extra_signatures = {}
    cast_names = [name for name in graph.observation_inputs if specs[name].dtype != tf.float32]
    if cast_names and stats is None:
        # the same model for float observations, cast as predict() casts them (e.g. float images -> uint8)
        float_specs = [_spec(spec.shape, "float32", name) if name in cast_names else spec
                       for name, spec in specs.items()]

        def serve_float_impl(*args):
            return serve_impl(*(tf.cast(value, specs[name].dtype) if name in cast_names else value
                                for name, value in zip(names, args)))

        extra_signatures["serving_float"] = tf.function(serve_float_impl, input_signature=float_specs,
                                                        autograph=False)

    inputs_meta = OrderedDict()
    for name, spec in specs.items():
        inputs_meta[name] = {"shape": _shape_list(spec.shape), "dtype": spec.dtype.name}
    outputs_meta = OrderedDict()
    for name, tensor in structured.items():
        outputs_meta[name] = {"shape": _shape_list(tensor.shape), "dtype": tensor.dtype.name,
                              "description": graph.descriptions.get(name, "")}
    metadata = _metadata(model, inputs_meta, outputs_meta, graph, stats, vecnormalize)
    return ExportBundle(module, serve, extra_signatures, specs, metadata, serve_impl)


def _shape_list(shape) -> list:
    return [None if dim is None else int(dim) for dim in shape]


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


def _metadata(model, inputs_meta, outputs_meta, graph, stats, vecnormalize) -> Dict[str, Any]:
    policy = model.policy_tf
    meta = OrderedDict(
        format=METADATA_FORMAT, format_version=METADATA_VERSION, sbtf_version=sbtf_version,
        algo=type(model).__name__, policy=type(policy).__name__,
        observation_space=_json_space(model.observation_space), action_space=_json_space(model.action_space),
        recurrent=bool(getattr(policy, "recurrent", False)),
        state_size=int(getattr(policy, "state_size", 0) or 0) if getattr(policy, "recurrent", False) else None,
        inputs=inputs_meta, outputs=outputs_meta, action=graph.notes.get("action", ""),
        vecnormalize=None)
    for key, value in graph.notes.items():  # e.g. HER's "her" entry (wrapped algorithm, flattening)
        meta.setdefault(key, value)
    if stats is not None:
        meta["vecnormalize"] = {"folded": True, "clip_obs": stats["clip_obs"], "epsilon": stats["epsilon"],
                                "formula": "clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)",
                                "source": os.fspath(vecnormalize) if isinstance(vecnormalize, (str, os.PathLike))
                                else type(vecnormalize).__name__}
    return _json_safe(meta)


# ---------------------------------------------------------------------------------------------------------------
# formats
# ---------------------------------------------------------------------------------------------------------------
def export_model(model: Any, path: Union[str, os.PathLike], format: str = "savedmodel",  # pylint: disable=W0622
                 vecnormalize: Any = None, opset: int = DEFAULT_OPSET, overwrite: bool = True) -> str:
    """
    Export an sbtf model's deterministic policy.

    :param model: an sbtf model (A2C, ACER, ACKTR, PPO1, PPO2, TRPO, GAIL, DQN, SAC, TD3, DDPG, or HER over DQN,
        SAC, TD3 or DDPG: its export takes ``observation``, ``achieved_goal`` and ``desired_goal``)
    :param path: output: a folder for ``savedmodel`` and ``tfjs``, a file (``.onnx``) for ``onnx``
    :param format: ``"savedmodel"``, ``"tfjs"`` (graph model: model.json + weight shards) or ``"onnx"``
    :param vecnormalize: a ``VecNormalize`` or the path of saved statistics to fold in (the exported model then
        takes raw observations: ``clip((obs - mean) / sqrt(var + eps), -clip_obs, clip_obs)`` is computed inside)
    :param opset: ONNX opset (``onnx`` only; default :data:`DEFAULT_OPSET`)
    :param overwrite: replace an existing output (otherwise an existing output is an error)
    :return: (str) the path written
    """
    fmt = str(format).lower().replace("_", "").replace("-", "").replace(".", "")
    aliases = {"savedmodel": "savedmodel", "tf": "savedmodel", "tensorflow": "savedmodel", "tfjs": "tfjs",
               "tensorflowjs": "tfjs", "onnx": "onnx"}
    if fmt not in aliases:
        raise ExportError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    fmt = aliases[fmt]
    path = os.fspath(path)
    if fmt == "onnx" and os.path.isdir(path):
        raise ExportError(f"the ONNX export is one file, but {path} is a folder; give a file name such as model.onnx")
    if os.path.exists(path):
        if not overwrite:
            raise ExportError(f"{path} exists (pass overwrite=True to replace it)")
    if fmt == "tfjs":
        _require("tensorflowjs", "the TF.js export")
    elif fmt == "onnx":
        _require("tf2onnx", "the ONNX export")
        _require("onnx", "the ONNX export")
    bundle = build_export_module(model, vecnormalize)
    if fmt == "savedmodel":
        _write_savedmodel(bundle, path)
    elif fmt == "tfjs":
        _write_tfjs(bundle, path)
    else:
        _write_onnx(bundle, path, int(opset))
    return path


def _require(name: str, what: str) -> Any:
    import importlib  # pylint: disable=import-outside-toplevel
    if name == "tensorflowjs":
        # tensorflowjs imports tensorflow_decision_forests, whose welcome message imports IPython (not installed)
        # whenever stdout is not a terminal or file (pytest capture, some pipes): ModuleNotFoundError 'IPython'
        os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ExportError(f"{what} needs the Python package {name!r} ({exc}); install it with {_EXTRA_HINT}") from exc


def _replace_dir(tmp_dir: str, path: str) -> None:
    """Move a finished output folder into place (an old output at ``path`` is replaced only on success)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(path):
        old = tempfile.mkdtemp(prefix=".old-", dir=parent)
        os.rmdir(old)
        os.replace(path, old)
        os.replace(tmp_dir, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        if os.path.exists(path):
            os.remove(path)
        os.replace(tmp_dir, path)


def _write_metadata(bundle: ExportBundle, folder: str, **extra: Any) -> None:
    meta = dict(bundle.metadata)
    meta.update(extra)
    with open(os.path.join(folder, METADATA_FILE), "w", encoding="utf-8") as handle:
        json.dump(meta, handle, indent=2)
        handle.write("\n")


def _save_savedmodel(bundle: ExportBundle, folder: str) -> None:
    tf = _tf()
    signatures = {"serving_default": bundle.serve}
    signatures.update(bundle.extra_signatures)
    tf.saved_model.save(bundle.module, folder, signatures=signatures)


def _write_savedmodel(bundle: ExportBundle, path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".sbtf-export-", dir=parent)
    try:
        _save_savedmodel(bundle, tmp)
        _write_metadata(bundle, tmp, export_format="savedmodel", signature="serving_default",
                        extra_signatures=sorted(bundle.extra_signatures))
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _tfjs_node_names(saved_dir: str) -> Dict[str, Dict[str, str]]:
    """Graph node names of the serving signature's inputs and outputs (what a TF.js GraphModel executes by)."""
    tf = _tf()
    concrete = tf.saved_model.load(saved_dir).signatures["serving_default"]
    inputs = OrderedDict()
    for spec, tensor in zip(tf.nest.flatten(concrete.structured_input_signature), concrete.inputs):
        inputs[spec.name] = tensor.name.split(":")[0]
    structured = concrete.structured_outputs
    keys = sorted(structured)  # tf.nest flattens a dict in sorted-key order: that is the order of concrete.outputs
    flat = [tensor for tensor in concrete.outputs if tensor.dtype != tf.resource]
    if len(flat) != len(keys):
        raise ExportError(f"the exported signature has {len(flat)} output tensors for {len(keys)} named outputs")
    by_name = dict(zip(keys, (tensor.name.split(":")[0] for tensor in flat)))
    outputs = OrderedDict((name, by_name[name]) for name in structured)
    return {"inputs": inputs, "outputs": outputs}


#: activations TF.js 4.x can apply inside fused MatMul / Conv2D kernels (tfjs-core ``fused_util``)
_TFJS_FUSED_ACTIVATIONS = frozenset({"Relu", "Relu6", "Elu", "LeakyRelu", "Sigmoid", "Prelu"})
_FUSED_OPS = frozenset({"_FusedMatMul", "_FusedConv2D", "FusedDepthwiseConv2dNative"})


def _split_unfusable_activations(model_json: Dict[str, Any]) -> List[str]:
    """
    Rewrite fused nodes whose activation TF.js cannot run fused (the converter's grappler pass fuses
    ``MatMul + BiasAdd + Tanh``, but TF.js 4.22 has no fused tanh kernel on any backend: "Activation tanh has not
    been implemented"): the fused node keeps ``BiasAdd`` under a new name and a separate activation node takes
    the original name, so consumers are unchanged. Returns the names of the rewritten nodes.
    """
    import base64  # pylint: disable=import-outside-toplevel

    nodes = model_json["modelTopology"].get("node", [])
    taken = {node["name"] for node in nodes}
    added, rewritten = [], []
    for node in nodes:
        if node.get("op") not in _FUSED_OPS:
            continue
        attr = node.setdefault("attr", {})
        encoded = attr.get("fused_ops", {}).get("list", {}).get("s", [])
        ops = [base64.b64decode(item).decode("utf-8") for item in encoded]
        if len(ops) < 2 or ops[-1] in _TFJS_FUSED_ACTIVATIONS:
            continue
        activation = ops[-1]
        name = node["name"]
        inner = f"{name}/sbtf_pre_{activation.lower()}"
        while inner in taken:
            inner += "_"
        taken.add(inner)
        attr["fused_ops"]["list"]["s"] = encoded[:-1]
        node["name"] = inner
        dtype = attr.get("T", {"type": "DT_FLOAT"})
        added.append({"name": name, "op": activation, "input": [inner], "attr": {"T": dtype}})
        rewritten.append(name)
    nodes.extend(added)
    return rewritten


def _write_tfjs(bundle: ExportBundle, path: str) -> None:
    _require("tensorflowjs", "the TF.js export")
    from tensorflowjs.converters import tf_saved_model_conversion_v2 as tfjs_conv  # pylint: disable=C0415

    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".sbtf-export-", dir=parent)
    saved = tempfile.mkdtemp(prefix="sbtf-savedmodel-")
    try:
        _save_savedmodel(bundle, saved)
        nodes = _tfjs_node_names(saved)
        out = os.path.join(tmp, "model")
        try:
            tfjs_conv.convert_tf_saved_model(saved, out, signature_def="serving_default", saved_model_tags="serve",
                                             metadata={"sbtf": bundle.metadata})
        except ValueError as exc:  # unsupported ops are reported as ValueError by the converter
            raise ExportError(f"the TF.js converter cannot convert this {bundle.metadata['algo']} "
                              f"{bundle.metadata['policy']}: {exc}") from exc
        model_json_path = os.path.join(out, "model.json")
        with open(model_json_path, "r", encoding="utf-8") as handle:
            model_json = json.load(handle)
        if _split_unfusable_activations(model_json):
            with open(model_json_path, "w", encoding="utf-8") as handle:
                json.dump(model_json, handle)
        graph_nodes = {node.get("name") for node in model_json["modelTopology"].get("node", [])}
        lost = [name for group in nodes.values() for name in group.values() if name not in graph_nodes]
        if lost:
            raise ExportError(f"the TF.js converter dropped the graph nodes {lost} of the exported signature")
        for name in os.listdir(out):
            os.replace(os.path.join(out, name), os.path.join(tmp, name))
        os.rmdir(out)
        nodes["inputs"] = OrderedDict((name, nodes["inputs"][name]) for name in bundle.metadata["inputs"])
        nodes["outputs"] = OrderedDict((name, nodes["outputs"][name]) for name in bundle.metadata["outputs"])
        _write_metadata(bundle, tmp, export_format="tfjs", model_json="model.json", tfjs_nodes=nodes,
                        note="int64 tensors are int32 in TF.js; run the model with policy.js or "
                             "model.execute({node: tensor}, [output nodes]) using tfjs_nodes")
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(saved, ignore_errors=True)


def _write_onnx(bundle: ExportBundle, path: str, opset: int) -> None:
    import onnx  # pylint: disable=import-outside-toplevel
    import tf2onnx  # pylint: disable=import-outside-toplevel
    from tf2onnx import constants as tf2onnx_constants  # pylint: disable=import-outside-toplevel

    supported = sorted(tf2onnx_constants.OPSET_TO_IR_VERSION)
    if opset not in supported or opset < 13:
        raise ExportError(f"ONNX opset {opset} is not supported here: tf2onnx {tf2onnx.__version__} writes opsets "
                          f"13..{supported[-1]} for sbtf policies (default {DEFAULT_OPSET})")
    tf = _tf()
    specs = list(bundle.serve.input_signature)
    # ONNX value names are unique in a graph: the recurrent output `state` is `next_state` there (input: `state`)
    renamed = {name: ONNX_OUTPUT_RENAMES.get(name, name) if name in bundle.input_specs else name
               for name in bundle.metadata["outputs"]}

    def onnx_fn(*args):
        return OrderedDict((renamed[key], value) for key, value in bundle.fn(*args).items())

    function = tf.function(onnx_fn, input_signature=specs, autograph=False)
    model_proto, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=opset)
    foreign = sorted({node.op_type for node in model_proto.graph.node if node.domain not in ("", "ai.onnx")})
    if foreign:
        raise ExportError(f"tf2onnx could not convert the TensorFlow ops {foreign} of this "
                          f"{bundle.metadata['algo']} {bundle.metadata['policy']} to standard ONNX ops (opset "
                          f"{opset}); try another opset or the savedmodel format")
    output_names = [out.name for out in model_proto.graph.output]
    expected = list(renamed.values())
    if sorted(output_names) != sorted(expected):
        raise ExportError(f"unexpected ONNX outputs {output_names} (expected {expected})")
    meta = dict(bundle.metadata)
    meta["outputs"] = OrderedDict((renamed[name], info) for name, info in bundle.metadata["outputs"].items())
    meta.update(export_format="onnx", opset=opset)
    entry = model_proto.metadata_props.add()
    entry.key, entry.value = METADATA_FILE, json.dumps(meta)
    model_proto.producer_name = "sbtf"
    onnx.checker.check_model(model_proto)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".sbtf-export-", suffix=".onnx", dir=parent)
    os.close(fd)
    try:
        with open(tmp, "wb") as handle:
            handle.write(model_proto.SerializeToString())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# ---------------------------------------------------------------------------------------------------------------
# the browser demo
# ---------------------------------------------------------------------------------------------------------------
def web_source_dir() -> str:
    """
    The folder with the demo page (``converters/web`` of the source tree). ``SBTF_WEB_DIR`` overrides it.
    """
    env = os.environ.get("SBTF_WEB_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "web"), os.path.join(os.path.dirname(here), "web")):
        if os.path.isfile(os.path.join(candidate, "index.html")):
            return candidate
    return os.path.join(os.path.dirname(here), "web")


def find_tfjs_bundle(web_dir: Optional[str] = None) -> Optional[str]:
    """
    The browser bundle of @tensorflow/tfjs (``tf.min.js``): ``SBTF_TFJS_BUNDLE``, else ``vendor/tf.min.js`` (made
    by ``npm install`` in the web folder), else the copy in its ``node_modules``; None when there is none.
    """
    env = os.environ.get("SBTF_TFJS_BUNDLE")
    if env:
        return env if os.path.isfile(env) else None
    web_dir = web_dir or web_source_dir()
    for candidate in (os.path.join(web_dir, "vendor", "tf.min.js"),
                      os.path.join(web_dir, "node_modules", "@tensorflow", "tfjs", "dist", "tf.min.js")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _missing_bundle_message(web_dir: str) -> str:
    return (f"the TF.js browser bundle (tf.min.js) was not found: run `npm install` in {web_dir} (it installs "
            "@tensorflow/tfjs from the npm registry and copies dist/tf.min.js to vendor/), or set SBTF_TFJS_BUNDLE "
            "to a tf.min.js of @tensorflow/tfjs 4.x")


def write_demo(model: Any, out_dir: Union[str, os.PathLike], vecnormalize: Any = None,
               tfjs_bundle: Optional[str] = None, tfjs_dir: Optional[str] = None) -> str:
    """
    Write a ready-to-serve demo folder: ``index.html``, ``cartpole.js``, ``policy.js``, ``vendor/tf.min.js`` and the
    TF.js graph model in ``model/``. Serve the folder over HTTP (``python -m http.server -d OUT``) and open
    ``index.html``: the page simulates CartPole-v1 in JavaScript and steps the exported policy in the browser.

    :param model: an sbtf model whose observations are CartPole's (Box of shape (4,)) and actions Discrete(2)
    :param out_dir: the folder to write (created; its ``model/`` is replaced)
    :param vecnormalize: VecNormalize statistics to fold in (see :func:`export_model`)
    :param tfjs_bundle: path of ``tf.min.js`` (default: :func:`find_tfjs_bundle`)
    :param tfjs_dir: a TF.js export of this model to copy as ``model/`` (default: export it)
    :return: (str) the path of ``index.html``
    """

    obs_space, act_space = model.observation_space, model.action_space
    if not (isinstance(obs_space, gym.spaces.Box) and tuple(obs_space.shape) == (4,)
            and isinstance(act_space, gym.spaces.Discrete) and int(act_space.n) == 2):
        raise ExportError(f"the browser demo simulates CartPole-v1 (observations Box(4,), actions Discrete(2)); this "
                          f"model has observations {obs_space} and actions {act_space}. Export with --format tfjs "
                          "without --demo to get the TF.js model alone")
    web_dir = web_source_dir()
    missing = [name for name in DEMO_FILES if not os.path.isfile(os.path.join(web_dir, name))]
    if missing:
        raise ExportError(f"the demo page files {missing} are missing from {web_dir} (set SBTF_WEB_DIR to the "
                          "converters/web folder of the sbtf sources)")
    bundle = tfjs_bundle or find_tfjs_bundle(web_dir)
    if bundle is None or not os.path.isfile(bundle):
        raise ExportError(_missing_bundle_message(web_dir))
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    model_dir = os.path.join(out_dir, "model")
    if tfjs_dir is not None:
        if not os.path.isfile(os.path.join(tfjs_dir, "model.json")):
            raise ExportError(f"{tfjs_dir} is not a TF.js export (no model.json)")
        tmp = tempfile.mkdtemp(prefix=".sbtf-export-", dir=out_dir)
        os.rmdir(tmp)
        shutil.copytree(tfjs_dir, tmp)
        _replace_dir(tmp, model_dir)
    else:
        export_model(model, model_dir, format="tfjs", vecnormalize=vecnormalize)
    for name in DEMO_FILES:
        shutil.copyfile(os.path.join(web_dir, name), os.path.join(out_dir, name))
    os.makedirs(os.path.join(out_dir, "vendor"), exist_ok=True)
    shutil.copyfile(bundle, os.path.join(out_dir, "vendor", "tf.min.js"))
    return os.path.join(out_dir, "index.html")


# ---------------------------------------------------------------------------------------------------------------
# command line: sbtf export MODEL.zip --format savedmodel|tfjs|onnx -o OUT [--algo A] [--vecnormalize P] [--demo D]
# ---------------------------------------------------------------------------------------------------------------
CLI_HELP = "export a trained model to a TF SavedModel, TF.js (with a browser demo) or ONNX"
CLI_DESCRIPTION = ("Export the deterministic policy of an sbtf or stable-baselines 2 model file: a TensorFlow "
                   "SavedModel (serving_default: observation -> action, ...), a TF.js graph model (model.json + "
                   "weights; --demo writes a CartPole web page that runs it) or an ONNX file. The exported 'action' "
                   "equals model.predict(obs, deterministic=True). See docs/export.md.")


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``sbtf export``."""
    parser.add_argument("model_path", metavar="MODEL", help="model file (.zip from sbtf; .zip or .pkl from "
                                                            "stable-baselines 2)")
    parser.add_argument("--format", default="savedmodel", choices=FORMATS,
                        help="output format (default: savedmodel)")
    parser.add_argument("-o", "--output", default=None, metavar="OUT",
                        help="output folder (savedmodel, tfjs) or file (onnx); default: next to MODEL "
                             "(MODEL_savedmodel/, MODEL_tfjs/, MODEL.onnx)")
    parser.add_argument("--algo", default=None, metavar="ALGO",
                        help="algorithm of the file (a2c, ppo2, dqn, ...); default: read from the file")
    parser.add_argument("--vecnormalize", default=None, metavar="PATH",
                        help="VecNormalize statistics (vecnormalize.pkl or its folder) to fold into the exported "
                             "model, which then takes raw observations")
    parser.add_argument("--demo", default=None, metavar="OUT_DIR",
                        help="with --format tfjs: also write a ready-to-serve CartPole web page (model + page + "
                             "vendored tf.min.js) to OUT_DIR")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                        help=f"ONNX opset (default {DEFAULT_OPSET})")


def register_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export`` sub-command to an ``argparse`` sub-parsers object; its handler is ``args.func(args)``."""
    parser = subparsers.add_parser("export", help=CLI_HELP, description=CLI_DESCRIPTION)
    add_cli_arguments(parser)
    parser.set_defaults(func=run_cli)
    return parser


class CommandError(Exception):
    """A one-line error of ``sbtf export`` with its exit code (2 bad input, 1 the export could not be done)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def detect_algorithm(model_path: str) -> str:
    """The algorithm class name (``PPO2``, ``DQN``, ...) of an sbtf or stable-baselines 2 model file."""

    payload = save_util.read_file_bytes(model_path)
    kind = save_util.inspect_model_bytes(payload)
    if kind == "sbtf":
        from sbtf.common.file_errors import get_load_limits  # pylint: disable=import-outside-toplevel
        from sbtf.common.fileio.safe_zip import open_zip, read_member  # pylint: disable=import-outside-toplevel

        with open_zip(payload, "model file") as archive:  # bounded, like every zip sbtf reads
            info = save_util.parse_json(read_member(archive, save_util.FORMAT_MEMBER,
                                                    get_load_limits().max_json_bytes, "model file"),
                                        f"'{save_util.FORMAT_MEMBER}' member of the model file")
        algo = info.get("algo") if isinstance(info, dict) else None
        if not algo:
            raise ExportError(f"{model_path} does not record its algorithm; pass --algo")
        return str(algo)
    parsed = parse_sb2(payload)
    if not parsed.algorithm:
        raise ExportError(f"cannot tell which algorithm wrote {model_path} ({parsed.report.detected_by}); pass --algo")
    return str(parsed.algorithm)


def _algorithm_class(name: str) -> type:
    info = algorithms.find(name.strip())
    if info is None:
        choices = sorted(algo.cli_name for algo in algorithms.all_algorithms())
        raise CommandError(f"unknown algorithm {name!r}; valid choices: {', '.join(choices)}", 2)
    try:
        return info.load()
    except ImportError as exc:
        raise CommandError(f"algorithm {info.name} is not available in this version of sbtf ({exc})", 2) from exc


def _default_output(model_path: str, fmt: str) -> str:
    stem = os.path.splitext(model_path)[0]
    return stem + (".onnx" if fmt == "onnx" else f"_{fmt}")


def run_command(args: argparse.Namespace) -> int:
    """Run ``export`` for parsed arguments (see :func:`add_cli_arguments`); errors raise :class:`CommandError`."""
    model_path = args.model_path
    if not os.path.isfile(model_path):
        for ext in (".zip", ".pkl"):
            if os.path.isfile(model_path + ext):
                model_path += ext
                break
        else:
            raise CommandError(f"model file {args.model_path} not found", 2)
    if args.demo and args.format != "tfjs":
        raise CommandError("--demo writes a TF.js web page: use it with --format tfjs", 2)
    if args.vecnormalize and not os.path.exists(args.vecnormalize):
        raise CommandError(f"--vecnormalize: {args.vecnormalize} not found", 2)
    if args.demo:  # fail before the (slow) load if the page cannot be made
        bundle = find_tfjs_bundle()
        if bundle is None:
            raise CommandError(_missing_bundle_message(web_source_dir()), 1)
    try:
        algo = args.algo or detect_algorithm(model_path)
    except (ExportError, ValueError) as exc:
        raise CommandError(f"cannot read {model_path}: {exc}", 2) from exc
    cls = _algorithm_class(algo)
    try:
        model = cls.load(model_path)
    except (ValueError, TypeError, KeyError, OSError, NotImplementedError) as exc:
        raise CommandError(f"cannot load {model_path} as {cls.__name__}: {exc}", 2) from exc
    if args.vecnormalize is None:  # statistics where `sbtf train` / the rl-baselines-zoo put them
        folder, stem = os.path.dirname(os.path.abspath(model_path)), os.path.splitext(model_path)[0]
        for beside in (os.path.join(folder, "vecnormalize.pkl"), os.path.join(stem, "vecnormalize.pkl"),
                       os.path.join(stem, "obs_rms.pkl")):
            if os.path.isfile(beside):
                print(f"note: {beside} exists; pass --vecnormalize {beside} if the model was trained on normalised "
                      "observations (the export then takes raw observations)", file=sys.stderr)
                break
    output = args.output or _default_output(model_path, args.format)
    try:
        if hasattr(model, "export"):  # the model's own method (an algorithm may extend it)
            written = model.export(output, format=args.format, vecnormalize=args.vecnormalize, opset=args.opset)
        else:
            written = export_model(model, output, format=args.format, vecnormalize=args.vecnormalize,
                                   opset=args.opset)
        wrapped = vars(model).get("model") if cls.__name__ == "HER" else None
        label = f"{cls.__name__} ({type(model.policy_tf).__name__}" + (
            f" of {type(wrapped).__name__})" if wrapped is not None else ")")
        print(f"Exported {label} from {model_path} to {written} ({args.format})")
        if args.demo:
            index = write_demo(model, args.demo, vecnormalize=args.vecnormalize, tfjs_dir=written)
            print(f"Wrote the CartPole demo to {args.demo}: serve it with `python -m http.server -d {args.demo} "
                  f"8000` and open http://127.0.0.1:8000/{os.path.basename(index)}")
    except ExportError as exc:
        raise CommandError(str(exc), 1) from exc
    return 0


def run_cli(args: argparse.Namespace) -> int:
    """Handler of ``sbtf export`` for a plain argparse parser (errors: one line on stderr, exit code 1 or 2)."""
    try:
        return run_command(args)
    except CommandError as exc:
        print(f"sbtf export: error: {exc.message}", file=sys.stderr)
        return exc.exit_code


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sbtf_converters.export MODEL ...`` (the same as ``sbtf export MODEL ...``)."""
    parser = argparse.ArgumentParser(prog="sbtf")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register_cli(subparsers)
    args = parser.parse_args(["export"] + list(sys.argv[1:] if argv is None else argv))
    return args.func(args)



if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
