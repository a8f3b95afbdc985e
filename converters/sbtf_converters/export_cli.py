"""The ``export`` command: ``sbtf export MODEL --format savedmodel|tfjs|onnx [-o OUT] [--vecnormalize P] [--demo D]``.

MODEL is an sbtf model file, a stable-baselines 2 file (``.zip`` / ``.pkl``), a stable-baselines3 / sb3-contrib zip
or an RL-Zoo3 run folder (``ENV.zip`` + ``ENV/vecnormalize.pkl``, whose statistics are folded in). Registered with
``sbtf`` by :mod:`sbtf_converters.cli_plugin`; ``python -m sbtf_converters.export`` runs it standalone.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional, Sequence

from sbtf import algorithms
from sbtf.common import save_util
from sbtf_converters.export import (DEFAULT_OPSET, FORMATS, ExportError, _missing_bundle_message, export_model,
                                    find_tfjs_bundle, web_source_dir, write_demo)
from sbtf_converters.legacy import parse_sb2
from sbtf_converters.sb3_files import find_run_folder, sb3_algorithm_name, sb3_class
from sbtf_converters.sb3_reader import SB3_FILE_KIND, read_sb3_zip

__all__ = ["CLI_HELP", "CLI_DESCRIPTION", "add_cli_arguments", "register_cli", "CommandError", "detect_algorithm",
           "run_command", "run_cli", "main"]


CLI_HELP = "export a trained model to a TF SavedModel, TF.js (with a browser demo) or ONNX"
CLI_DESCRIPTION = ("Export the deterministic policy of an sbtf, stable-baselines 2 or stable-baselines3 / sb3-contrib "
                   "model file, or of an RL-Zoo3 run folder (its VecNormalize statistics folded in): a TensorFlow "
                   "SavedModel (serving_default: observation -> action, ...), a TF.js graph model (model.json + "
                   "weights; --demo writes a CartPole web page that runs it) or an ONNX file. The exported 'action' "
                   "equals model.predict(obs, deterministic=True). See docs/export.md.")


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``sbtf export``."""
    parser.add_argument("model_path", metavar="MODEL", help="model file (.zip from sbtf or stable-baselines3 / "
                                                            "sb3-contrib; .zip or .pkl from stable-baselines 2), or "
                                                            "an RL-Zoo3 run folder (ENV.zip, ENV/vecnormalize.pkl)")
    parser.add_argument("--format", default="savedmodel", choices=FORMATS,
                        help="output format (default: savedmodel)")
    parser.add_argument("-o", "--output", default=None, metavar="OUT",
                        help="output folder (savedmodel, tfjs) or file (onnx); default: next to MODEL "
                             "(MODEL_savedmodel/, MODEL_tfjs/, MODEL.onnx)")
    parser.add_argument("--algo", default=None, metavar="ALGO",
                        help="algorithm of the file (a2c, ppo2, dqn, ...; for a stable-baselines3 file its SB3 name: "
                             "ppo, a2c, qrdqn, ...); default: read from the file")
    parser.add_argument("--vecnormalize", default=None, metavar="PATH",
                        help="VecNormalize statistics (vecnormalize.pkl or its folder) to fold into the exported "
                             "model, which then takes raw observations (default for an RL-Zoo3 run folder: its "
                             "ENV/vecnormalize.pkl)")
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
    """The algorithm class name (``PPO2``, ``DQN``, ``QRDQN``...) of an sbtf, stable-baselines 2 or stable-baselines3
    model file."""

    payload = save_util.read_file_bytes(model_path)
    kind = save_util.inspect_model_bytes(payload)
    if kind == SB3_FILE_KIND:
        return sb3_algorithm_name(read_sb3_zip(payload, model_path))
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
    run_stats = None
    if os.path.isdir(model_path):  # an RL-Zoo3 run folder: ENV.zip, and ENV/vecnormalize.pkl when it normalised
        try:
            run = find_run_folder(model_path)
        except FileNotFoundError as exc:
            raise CommandError(str(exc), 2) from exc
        model_path, run_stats = run.model_path, run.vecnormalize
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
        sb3_file = save_util.inspect_model_bytes(save_util.read_file_bytes(model_path)) == SB3_FILE_KIND
    except (ExportError, ValueError) as exc:
        raise CommandError(f"cannot read {model_path}: {exc}", 2) from exc
    if sb3_file:  # --algo a2c names stable-baselines 2's A2C elsewhere; an SB3 file is played by sbtf.sb3's
        try:
            cls = sb3_class(algo)
        except ValueError as exc:
            raise CommandError(f"{model_path} is a stable-baselines3 file: {exc}", 2) from exc
    else:
        cls = _algorithm_class(algo)
    try:
        model = cls.load(model_path)
    except (ValueError, TypeError, KeyError, OSError, NotImplementedError) as exc:
        raise CommandError(f"cannot load {model_path} as {cls.__name__}: {exc}", 2) from exc
    vecnormalize = args.vecnormalize
    if vecnormalize is None and run_stats is not None:
        vecnormalize = run_stats
        print(f"Folding the run's VecNormalize statistics {run_stats} into the export (it takes raw observations)")
    if vecnormalize is None:  # statistics where `sbtf train` / the rl-baselines-zoo put them
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
            written = model.export(output, format=args.format, vecnormalize=vecnormalize, opset=args.opset)
        else:
            written = export_model(model, output, format=args.format, vecnormalize=vecnormalize,
                                   opset=args.opset)
        wrapped = vars(model).get("model") if cls.__name__ == "HER" else None
        label = f"{cls.__name__} ({type(model.policy_tf).__name__}" + (
            f" of {type(wrapped).__name__})" if wrapped is not None else ")")
        print(f"Exported {label} from {model_path} to {written} ({args.format})")
        if args.demo:
            index = write_demo(model, args.demo, vecnormalize=vecnormalize, tfjs_dir=written)
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
