"""Restore the optimizer state of a stable-baselines3 / sb3-contrib zip (its ``*.optimizer.pth`` members) into the
sbtf model's optimizers, where the two keep the same state.

A PyTorch optimizer's ``state_dict()`` is ``{"state": {i: {...}}, "param_groups": [{..., "params": [i, ...]}]}``:
parameter ``i`` is the ``i``-th of the module's ``parameters()`` it was built with (``named_parameters()`` order,
a module registered twice counted once). Which parameters each SB3 optimizer holds:

* ``policy.optimizer``: the whole policy (PPO, A2C, TRPO, MaskablePPO), DQN's ``q_net``, QR-DQN's ``quantile_net``;
* ``actor.optimizer`` / ``critic.optimizer``: SAC / TQC / TD3 / DDPG's actor and critic (a critic sharing the
  actor's features extractor leaves it out);
* ``ent_coef_optimizer``: ``log_ent_coef``.

sbtf's :class:`~sbtf.common.optimizers.TorchAdam` keeps PyTorch Adam's state (``m`` = ``exp_avg``, ``v`` =
``exp_avg_sq``, ``t`` = ``step``; its epsilon is applied as PyTorch's), and
:class:`~sbtf.common.optimizers.TorchStyleRMSProp` PyTorch RMSprop's (``ms`` = ``square_avg``, ``mom`` =
``momentum_buffer``): both continue exactly. Anything else (SB3's ``RMSpropTFLike``, another class, betas / eps /
alpha that differ, a parameter count that does not match) leaves sbtf's fresh state and logs one note saying why.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from sbtf.common.file_errors import ModelDataError
from sbtf_converters.sb3_layouts import Target, family_of, unmapped_allowed

__all__ = ["OPTIMIZER_MEMBERS", "optimizer_parameter_names", "restore_optimizers"]

LOGGER = logging.getLogger("sbtf.sb3")

#: SB3 zip member -> the sbtf model attribute holding the optimizer of the same parameters
OPTIMIZER_MEMBERS = {"policy.optimizer.pth": "optimizer", "actor.optimizer.pth": "actor_optimizer",
                     "critic.optimizer.pth": "critic_optimizer", "ent_coef_optimizer.pth": "ent_coef_optimizer"}
_PREFIXES = {"dqn": "q_net.", "qrdqn": "quantile_net."}


def optimizer_parameter_names(class_name: str, member: str, state_names: Sequence[str],
                              aliases: Sequence[str]) -> List[List[str]]:
    """
    The SB3 tensor names of the parameters a ``*.optimizer.pth`` member's indices refer to, in index order: one
    list per SB3 version's layout (DQN / QR-DQN's optimizer holds the online network since SB3 1.x, the whole
    policy, target network included, before); the one whose length is the file's is used.

    :param class_name: the sbtf class (``"PPO"``, ``"SAC"``...)
    :param member: the zip member (``"policy.optimizer.pth"``...)
    :param state_names: the policy's state dict names in file order (with ``log_ent_coef`` if stored)
    :param aliases: names of tensors SB3 stores twice (see :func:`sbtf_converters.sb3_layouts.plan_state_dict`)
    """
    alias = set(aliases)
    names = [name for name in state_names if name not in alias and name != "log_ent_coef"]
    family = family_of(class_name)
    if member == "ent_coef_optimizer.pth":
        return [["log_ent_coef"] if "log_ent_coef" in state_names else []]
    if member == "policy.optimizer.pth":
        prefix = _PREFIXES.get(family)
        if prefix is None:
            return [names]
        return [[name for name in names if name.startswith(prefix)], names]
    prefix = member.split(".", 1)[0] + "."
    return [[name for name in names if name.startswith(prefix)]]


def _param_indices(payload: Any, what: str) -> Tuple[List[int], dict, dict]:
    """The flat index list, the first param group and the per-index state of a torch optimizer state dict."""
    if type(payload) is not dict or set(payload) != {"state", "param_groups"}:
        raise ModelDataError(f"{what} is not a PyTorch optimizer state (a dict of 'state' and 'param_groups').")
    groups, state = payload["param_groups"], payload["state"]
    if type(groups) is not list or not groups or type(state) is not dict:
        raise ModelDataError(f"{what} has no parameter groups.")
    indices: List[int] = []
    for group in groups:
        if type(group) is not dict or type(group.get("params")) is not list or \
                not all(type(i) is int for i in group["params"]):
            raise ModelDataError(f"{what} has a parameter group without its integer parameter list.")
        indices += group["params"]
    if len(set(indices)) != len(indices) or not all(type(key) is int and key in indices for key in state):
        raise ModelDataError(f"{what} names a parameter twice, or holds state for a parameter it does not list.")
    return indices, groups[0], state


def _hyperparameters_differ(optimizer: Any, group: dict, kind: str) -> Optional[str]:
    """Why the file's group settings differ from the sbtf optimizer's (None: the same)."""
    def differs(a: Any, b: Any) -> bool:
        try:
            return not np.isclose(float(a), float(b), rtol=1e-6, atol=0.0)
        except (TypeError, ValueError):
            return True

    if kind == "Adam":
        betas = group.get("betas")
        if type(betas) not in (tuple, list) or len(betas) != 2 or differs(betas[0], optimizer.beta1) or \
                differs(betas[1], optimizer.beta2) or differs(group.get("eps"), optimizer.epsilon):
            return f"betas/eps {group.get('betas')}/{group.get('eps')} != ({optimizer.beta1}, {optimizer.beta2})/" \
                   f"{optimizer.epsilon}"
        if group.get("amsgrad", False) or group.get("weight_decay", 0):
            return "amsgrad or weight_decay, which sbtf's Adam does not have"
    else:
        if differs(group.get("alpha"), optimizer.decay) or differs(group.get("eps"), optimizer.epsilon) or \
                differs(group.get("momentum", 0.0), optimizer.momentum):
            return f"alpha/eps/momentum {group.get('alpha')}/{group.get('eps')}/{group.get('momentum')} != " \
                   f"{optimizer.decay}/{optimizer.epsilon}/{optimizer.momentum}"
        if group.get("centered", False) or group.get("weight_decay", 0):
            return "centered or weight_decay, which sbtf's RMSprop does not have"
    return None


def _kind(optimizer: Any) -> Optional[str]:
    from sbtf.common.optimizers import TorchAdam, TorchStyleRMSProp  # pylint: disable=import-outside-toplevel

    if isinstance(optimizer, TorchAdam) and optimizer.fused:
        return "Adam"
    if isinstance(optimizer, TorchStyleRMSProp):
        return "RMSprop"
    return None


def _slot_values(class_name: str, optimizer: Any, kind: str, order: Sequence[str], indices: Sequence[int], state: dict,
                 sbtf_to_sb3: Mapping[str, str], var_names: Mapping[int, str], targets: Mapping[str, Target],
                 what: str) -> Tuple[List[Tuple[Any, np.ndarray]], float]:
    """(slot variable, value) pairs and the step count to assign, or ModelDataError saying why not."""
    keys = ("exp_avg", "exp_avg_sq") if kind == "Adam" else ("square_avg", "momentum_buffer")
    assignments: List[Tuple[Any, np.ndarray]] = []
    steps = set()
    index_of = dict(zip(order, indices))
    slots = list(zip(optimizer.m, optimizer.v)) if kind == "Adam" else list(zip(optimizer.ms, optimizer.mom))
    for var, (first, second) in zip(optimizer.variables_, slots):
        sbtf_name = var_names.get(id(var))
        sb3_name = sbtf_to_sb3.get(sbtf_name) if sbtf_name else None
        if sb3_name is None and sbtf_name and unmapped_allowed(class_name, sbtf_name):
            continue  # not in SB3's maths: its slots stay fresh
        if sb3_name is None or sb3_name not in index_of:
            raise ModelDataError(f"the sbtf variable {sbtf_name or var.name} has no parameter in {what}")
        entry = state.get(index_of[sb3_name])
        if entry is None:
            continue  # a parameter PyTorch never stepped: fresh state, as in PyTorch
        if type(entry) is not dict:
            raise ModelDataError(f"{what} holds a parameter state that is not a dict")
        if kind == "Adam":
            try:
                steps.add(float(np.asarray(entry.get("step", np.nan), dtype=np.float64)))
            except (TypeError, ValueError):
                raise ModelDataError(f"{what}: the step count of {sb3_name} is not a number") from None
        for slot, key in zip((first, second), keys):
            if key not in entry:
                if key == "momentum_buffer":
                    continue  # RMSprop without momentum keeps none
                raise ModelDataError(f"{what} has no {key} for {sb3_name}")
            value = np.asarray(entry[key])
            if value.dtype.kind != "f":
                raise ModelDataError(f"{what}: the {key} of {sb3_name} holds {value.dtype} values")
            value = targets[sb3_name].transform(value)
            wanted = tuple(int(d) for d in slot.shape)
            if int(np.prod(value.shape)) != int(np.prod(wanted)):
                raise ModelDataError(f"{what}: the {key} of {sb3_name} has shape {value.shape}, its variable "
                                     f"{wanted}")
            assignments.append((slot, np.asarray(value, np.float32).reshape(wanted)))
    if kind == "Adam" and len(steps) > 1:
        raise ModelDataError(f"{what} holds parameters stepped different numbers of times ({sorted(steps)}), sbtf's "
                             "Adam one step count")
    step = steps.pop() if steps else 0.0
    if not np.isfinite(step) or step < 0 or step != int(step):
        raise ModelDataError(f"{what} holds the step count {step}")
    return assignments, step


def restore_optimizers(model: Any, class_name: str, members: Mapping[str, Any], state_names: Sequence[str],
                       targets: Mapping[str, Target], aliases: Sequence[str], file_optimizer: str = "",
                       source: str = "the stable-baselines3 file") -> Dict[str, str]:
    """
    Put the state of each ``*.optimizer.pth`` member (already read as data) into the sbtf optimizer of the same
    parameters. Each optimizer is restored whole or left fresh, never in part.

    :param model: the built sbtf model, its weights loaded
    :param class_name: its class name
    :param members: zip member name -> its unpickled content
    :param state_names: the policy's state dict names in file order
    :param targets: SB3 name -> :class:`Target` (from :func:`~sbtf_converters.sb3_layouts.plan_state_dict`)
    :param aliases: the state dict's alias names
    :param file_optimizer: the optimizer class the file's policy_kwargs name (``"RMSpropTFLike"``: not restored)
    :param source: the file, for messages
    :return: member -> ``"restored"`` or the reason it was not (each reason is also logged once as a note)
    """
    named = model._named_parameters()  # pylint: disable=protected-access
    var_names = {id(var): name for name, var in named.items()}
    sbtf_to_sb3 = {target.name: name for name, target in targets.items()}
    outcome: Dict[str, str] = {}
    for member, payload in members.items():
        what = f"the {member} of {source}"
        attribute = OPTIMIZER_MEMBERS.get(member)
        optimizer = getattr(model, attribute, None) if attribute else None
        kind = _kind(optimizer) if optimizer is not None else None
        try:
            if file_optimizer == "RMSpropTFLike":
                raise ModelDataError("it is SB3's RMSpropTFLike (mean square starting at 1, epsilon inside the "
                                     "root), which sbtf trains as PyTorch's RMSprop")
            if kind is None:
                raise ModelDataError(f"sbtf's {class_name} has no optimizer of PyTorch's state for it "
                                     f"({type(optimizer).__name__})")
            indices, group, state = _param_indices(payload, what)
            orders = optimizer_parameter_names(class_name, member, state_names, aliases)
            order = next((names for names in orders if len(names) == len(indices)), None)
            if order is None:
                raise ModelDataError(f"it lists {len(indices)} parameters, the {class_name} policy has "
                                     f"{' or '.join(str(len(names)) for names in orders)} for it")
            differs = _hyperparameters_differ(optimizer, group, kind)
            if differs:
                raise ModelDataError(f"its settings differ from the optimizer sbtf built ({differs})")
            assignments, step = _slot_values(class_name, optimizer, kind, order, indices, state, sbtf_to_sb3,
                                             var_names, targets, what)
        except ModelDataError as exc:
            reason = str(exc)
            LOGGER.warning("Note: %s: the optimizer state is not restored (%s); training continues from a fresh "
                           "%s state.", what, reason, type(optimizer).__name__ if optimizer is not None else "")
            outcome[member] = reason
            continue
        for slot, value in assignments:
            slot.assign(value)
        if kind == "Adam":
            optimizer.t.assign(step)
        outcome[member] = "restored"
    return outcome
