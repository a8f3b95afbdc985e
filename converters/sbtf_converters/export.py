"""Export sbtf policies for deployment: TensorFlow SavedModel, TF.js graph model (+ a browser demo) and ONNX.

Entry points
* :func:`export_model` (also ``model.export(path, format=...)``) -- write one format;
* :func:`build_export_module` -- the ``tf.Module`` whose ``serve`` function is what every format contains;
* :func:`write_demo` -- a ready-to-serve web folder (CartPole page + the TF.js model + the vendored tfjs bundle);
* :func:`register_exporter` -- how an algorithm plugs in its *deterministic action graph*;
* :func:`register_cli` / :func:`run_cli` / :func:`run_command` -- the ``export`` command (``sbtf export`` through
  :mod:`sbtf_converters.cli_plugin`, or ``python -m sbtf_converters.export``); they live in
  :mod:`sbtf_converters.export_cli` and are importable from here.

The graphs of the algorithms (:class:`ExportGraph`, :func:`register_exporter`) live in
:mod:`sbtf_converters.export_graphs`; this module turns a graph into a ``tf.Module`` (VecNormalize folded in) and
writes the formats.

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

import json
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import gymnasium as gym
import numpy as np

from sbtf import __version__ as sbtf_version
from sbtf.common.vec_env import VecNormalize
from sbtf_converters.export_graphs import (HER_FLAT_OBSERVATION, ExportError, ExportGraph, _json_safe, _json_space,
                                           _spec, _tf, get_export_graph, register_exporter)

__all__ = [
    "FORMATS", "DEFAULT_OPSET", "ExportError", "ExportGraph", "ExportBundle", "export_model", "build_export_module",
    "register_exporter", "get_export_graph", "load_vecnormalize_stats", "write_demo", "find_tfjs_bundle",
    "web_source_dir", "main", "HER_FLAT_OBSERVATION",
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


#: names that live in :mod:`sbtf_converters.export_cli` (the ``export`` command), still importable from here
_CLI_NAMES = ("CLI_HELP", "CLI_DESCRIPTION", "add_cli_arguments", "register_cli", "CommandError", "detect_algorithm",
              "run_command", "run_cli")


def __getattr__(name: str) -> Any:
    """``export.run_cli`` & co.: imported from :mod:`sbtf_converters.export_cli` on first use (it imports this
    module)."""
    if name in _CLI_NAMES:
        from sbtf_converters import export_cli  # pylint: disable=import-outside-toplevel

        return getattr(export_cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sbtf_converters.export MODEL ...`` (the same as ``sbtf export MODEL ...``)."""
    from sbtf_converters import export_cli  # pylint: disable=import-outside-toplevel

    return export_cli.main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
