"""What is saved is derived (issue #30, item 5): for every registered algorithm (``sbtf.algorithms.all_algorithms()``,
so a class added later is covered without touching this file), every constructor argument is either stored in the
model file (its data schema) or declared in ``_not_saved_arguments`` with a reason; and a non-default value of each
stored argument comes back from a file unchanged (not as the constructor's default).

The round trip runs at the level of the file's ``data`` (constructor with ``_init_setup_model=False``,
``_get_save_data``, the zip writer, the zip reader, the schema check): no network is built, so every class is checked
in seconds.
"""
from __future__ import annotations

import enum
import inspect
import io
import math
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import pytest

from sbtf.algorithms import all_algorithms, get
from sbtf.common import save_util
from sbtf.common.file_errors import ModelDataError

ALGORITHMS = all_algorithms()
_IDS = [algo.cli_name for algo in ALGORITHMS]

#: arguments that are not hyperparameters of the wrapped model but of the test set-up
_SETUP_ARGUMENTS = ("policy", "model_class")
#: string values with a meaningful different value (every other string default is not perturbed). Not "auto": an
#: entropy coefficient "auto_<x>" starts the learned coefficient at x, and the file holds the learned value itself (the
#: log_ent_coef parameter), so "auto" is what stable-baselines 2 and sbtf store
_STRING_ALTERNATIVES = {"constant": "linear", "future": "final", "linear": "constant"}


def _constructor_parameters(cls: type) -> Dict[str, inspect.Parameter]:
    """The named constructor parameters of ``cls`` (``**kwargs`` forwarded to an ``extends`` algorithm included)."""
    params = {name: p for name, p in inspect.signature(cls.__init__).parameters.items()
              if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    algo = next((a for a in ALGORITHMS if a.name == cls.__name__ and a.load() is cls), None)
    if algo is not None and algo.extends:
        for name, p in _constructor_parameters(get(algo.extends).load()).items():
            params.setdefault(name, p)
    return params


def _stored_keys(cls: type) -> set:
    """The keys a file of ``cls`` can store (HER: its own keys beside the wrapped model's)."""
    keys = set(cls._data_schema())
    if cls.__name__ == "HER":
        from sbtf.her.her import _HER_SCHEMA

        keys |= set(_HER_SCHEMA)
    return keys


@pytest.mark.parametrize("algo", ALGORITHMS, ids=_IDS)
def test_every_constructor_argument_is_stored_or_declared(algo):
    cls = algo.load()
    stored = _stored_keys(cls)
    declared = cls._unsaved_arguments()
    lost = [name for name in _constructor_parameters(cls) if name not in stored and name not in declared]
    assert not lost, (f"{cls.__module__}.{cls.__name__}: the constructor arguments {lost} are not stored by save() "
                      "(not in _save_schema) and not declared in _not_saved_arguments: after load() they would "
                      "silently be the constructor's defaults")
    assert all(isinstance(reason, str) and reason.strip() for reason in declared.values())
    both = sorted(set(declared) & stored - {"policy"})
    assert not both, f"{cls.__name__}: {both} are stored and declared as not stored at once"


def _perturbed(name: str, default: Any) -> List[Any]:
    """Values different from ``default`` of the same kind (a second one for constructors that refuse the first)."""
    if default is None:  # the kind is not known: the usual ones, in turn (see _optional_kinds)
        if name == "policy_kwargs":
            return [{"net_arch": [8]}]
        return [] if name.endswith(("_kwargs", "_class", "noise", "dataset")) else [3, 0.5]
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 1, default + 2] if default >= 0 else [1, 2]
    if isinstance(default, float):
        if default == 0.0:
            return [0.25, 0.01]
        if math.isinf(default):
            return [10.0]
        return [default * 0.5 + (0.01 if default > 0 else -0.01), default * 0.9]
    if isinstance(default, str):
        return [_STRING_ALTERNATIVES[default]] if default in _STRING_ALTERNATIVES else []
    if isinstance(default, tuple) and len(default) == 2 and isinstance(default[0], int):
        return [(default[0] + 1, default[1])]
    return []


def _spaces_for(cls: type):
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    supported = getattr(cls, "_supported_action_spaces", (gym.spaces.Box,))
    if gym.spaces.Discrete in supported:
        return obs_space, gym.spaces.Discrete(2)
    return obs_space, gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _make(cls: type, **kwargs):
    """The model without networks (as load() makes it), given the spaces a file would carry."""
    if cls.__name__ == "HER":
        from sbtf.sac import SAC

        model = cls("MlpPolicy", None, SAC, _init_setup_model=False, **kwargs)
        model.model = SAC("MlpPolicy", None, _init_setup_model=False)
        for target in (model, model.model):
            target.observation_space, target.action_space = _spaces_for(SAC)
            target.n_envs = 1
        return model
    error: Optional[Exception] = None
    for policy in ("MlpPolicy", "MlpLstmPolicy"):  # RecurrentPPO's policies are LSTM ones
        try:
            model = cls(policy, None, _init_setup_model=False, **kwargs)
        except (ValueError, KeyError) as exc:
            if "policy" not in str(exc).lower():
                raise
            error = exc
            continue
        model.observation_space, model.action_space = _spaces_for(cls)
        model.n_envs = 1
        return model
    raise error


def _file_data(model) -> Dict[str, Any]:
    """``model``'s data through the file writer and reader and the schema check (what load() sets on the model)."""
    buffer = io.BytesIO()
    save_util.save_to_zip(buffer, model._get_save_data(), {}, meta={"algo": model._file_algo_name()})
    data, _, _ = save_util.load_from_zip_bytes(buffer.getvalue())
    if type(model).__name__ == "HER":
        from sbtf.common.fileio import model_schema
        from sbtf.her.her import _HER_SCHEMA

        her = {key: data.pop(key) for key in list(data) if key in _HER_SCHEMA}
        checked = model.model._checked_data(data)
        checked.update(model_schema.check_data(_HER_SCHEMA, her)[0])
        return checked
    return type(model)._checked_data(data)


def _same(a: Any, b: Any) -> bool:
    """Whether the stored ``a`` gives back the given ``b``."""
    if isinstance(a, enum.Enum) or isinstance(b, enum.Enum):  # an enum given (and compared) by its name
        def name(x):
            return x.name.lower() if isinstance(x, enum.Enum) else str(x).lower()
        return name(a) == name(b)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):  # what was given comes back (defaults may be added, as SB3's A2C)
        return all(key in a and _same(a[key], value) for key, value in b.items())
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("algo", ALGORITHMS, ids=_IDS)
def test_stored_constructor_arguments_come_back_from_a_file(algo):
    cls = algo.load()
    stored = _stored_keys(cls)
    checked: List[str] = []
    for name, param in _constructor_parameters(cls).items():
        if name not in stored or name in _SETUP_ARGUMENTS or param.default is inspect.Parameter.empty:
            continue
        for value in _perturbed(name, param.default):
            try:
                model = _make(cls, **{name: value})
            except (ValueError, NotImplementedError, TypeError):
                continue  # a value the constructor refuses: try the next one
            try:
                data = _file_data(model)
            except ModelDataError:
                if param.default is None:
                    continue  # an optional argument of another kind than the one tried
                raise
            assert name in data, f"{cls.__name__}({name}={value!r}): the file has no {name!r}"
            assert _same(data[name], value), (f"{cls.__name__}({name}={value!r}) is stored as {data[name]!r}: "
                                              "load() would not give the value back")
            checked.append(name)
            break
    assert checked, f"{cls.__name__}: no constructor argument could be checked"


def test_a_lost_argument_is_reported():
    """The check above fails for a class with an argument it neither stores nor declares."""
    from sbtf.contrib import QRDQN

    class QRDQNWithExtra(QRDQN):
        def __init__(self, policy, env, extra_knob: int = 3, **kwargs):
            super().__init__(policy, env, **kwargs)
            self.extra_knob = extra_knob

    stored = _stored_keys(QRDQNWithExtra)
    lost = [name for name in _constructor_parameters(QRDQNWithExtra)
            if name not in stored and name not in QRDQNWithExtra._unsaved_arguments()]
    assert lost == ["extra_knob"]


def test_unsaved_arguments_merge_along_the_hierarchy():
    from sbtf.common.base_class import BaseRLModel
    from sbtf.ddpg import DDPG

    assert set(BaseRLModel._unsaved_arguments()) <= set(DDPG._unsaved_arguments())
    assert "eval_env" in DDPG._unsaved_arguments() and "eval_env" not in BaseRLModel._unsaved_arguments()
