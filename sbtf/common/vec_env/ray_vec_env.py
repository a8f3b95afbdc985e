"""``RayVecEnv``: environments in Ray actors, anywhere in a Ray cluster.

Each actor holds a batch of envs (``envs_per_actor``) in a :class:`~sbtf.common.vec_env.DummyVecEnv`, so every env
has exactly the semantics of sbtf's other VecEnvs (same-step auto-reset, ``terminal_observation``,
``TimeLimit.truncated``, Monitor infos, ``seed + i`` seeding). A step sends each actor its actions at once and
gathers the results in env order. The actors are placed by Ray (``SPREAD`` across nodes by default): on the nodes
of the cluster the driver joined with ``ray.init(address=...)``, or on a local Ray started for you.

Faults surface as :class:`~sbtf.common.vec_env.VecEnvWorkerError` naming the envs and the node: an env that raises
(its exception type, message and the remote traceback), an actor or node that dies (Ray detects a dead process
within seconds), or no answer within ``timeout`` seconds. ``close()`` (also on Ctrl-C inside a step and at
interpreter exit) kills the actors.
"""
from __future__ import annotations

import atexit
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
from gymnasium import spaces

from sbtf.common.vec_env.base_vec_env import Indices, VecEnv
from sbtf.common.vec_env.dummy_vec_env import DummyVecEnv
from sbtf.common.vec_env.subproc_vec_env import VecEnvWorkerError

__all__ = ["RayVecEnv"]


def _ray():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("RayVecEnv needs Ray: pip install 'sbtf[ray]' (or pip install ray)") from exc
    return ray


class _EnvWorker:
    """The body of one Ray actor: a DummyVecEnv of some envs, and where it runs."""

    def __init__(self, env_fns: List[Callable[[], Any]]):
        self.venv = DummyVecEnv(env_fns)

    def spaces(self):
        return self.venv.observation_space, self.venv.action_space

    def location(self) -> Dict[str, Any]:
        import os

        import ray

        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "ip": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def reset(self):
        return self.venv.reset()

    def step(self, actions):
        return self.venv.step(actions)

    def seed(self, seed: int):
        return self.venv.seed(seed)

    def get_attr(self, name: str, indices):
        return self.venv.get_attr(name, indices)

    def set_attr(self, name: str, value: Any, indices):
        return self.venv.set_attr(name, value, indices)

    def env_method(self, name: str, args, kwargs, indices):
        return self.venv.env_method(name, *args, indices=indices, **kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices):
        return self.venv.env_is_wrapped(wrapper_class, indices)

    def get_images(self):
        return self.venv.get_images()

    def close(self):
        self.venv.close()


_OPEN: "weakref.WeakSet[RayVecEnv]" = weakref.WeakSet()


@atexit.register
def _close_open_envs() -> None:  # pragma: no cover - runs at interpreter exit
    for venv in list(_OPEN):
        venv.close()


class RayVecEnv(VecEnv):
    """
    Environments in Ray actors (see the module docstring).

    :param env_fns: ([callable]) functions that create the envs (as for ``SubprocVecEnv``; they are sent to the
        actors with cloudpickle, so they must not hold what cannot travel: open files, locks, ...)
    :param envs_per_actor: (int) envs stepped one after the other inside each actor (more: fewer messages per
        step; fewer: more parallelism)
    :param address: (str) the Ray cluster to join when Ray is not initialised yet (``"auto"``, ``"ray://..."``,
        ``"host:port"``; None: start a local Ray)
    :param actor_options: (dict) ``ray.remote`` options of each actor (default ``num_cpus=1`` and
        ``scheduling_strategy="SPREAD"``), e.g. ``{"resources": {"simulator": 1}}`` to pin envs to some nodes
    :param timeout: (float) seconds to wait for a step, reset or call before raising (None: wait as long as the
        actors live; a dead actor or node is reported as soon as Ray detects it)
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], envs_per_actor: int = 1, address: Optional[str] = None,
                 actor_options: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None):
        ray = _ray()
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("RayVecEnv needs at least one env function")
        if int(envs_per_actor) < 1:
            raise ValueError(f"RayVecEnv needs envs_per_actor >= 1, got {envs_per_actor}")
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        self.timeout = timeout
        self._closed = False
        options = {"num_cpus": 1, "scheduling_strategy": "SPREAD", "max_restarts": 0}
        options.update(actor_options or {})
        worker_class = ray.remote(**options)(_EnvWorker)
        per = int(envs_per_actor)
        self._slices = [(start, min(start + per, len(env_fns))) for start in range(0, len(env_fns), per)]
        self._actors = [worker_class.remote(env_fns[start:stop]) for start, stop in self._slices]
        self._locations: List[Dict[str, str]] = [{} for _ in self._actors]
        self._pending: Optional[list] = None
        _OPEN.add(self)
        try:
            self._locations = self._gather([actor.location.remote() for actor in self._actors], "start")
            observation_space, action_space = self._gather([self._actors[0].spaces.remote()], "start")[0]
        except BaseException:
            self.close()
            raise
        super().__init__(len(env_fns), observation_space, action_space)

    # ------------------------------------------------------------------ talking to the actors
    def _where(self, actor_index: int) -> str:
        start, stop = self._slices[actor_index]
        envs = f"env {start}" if stop - start == 1 else f"envs {start}-{stop - 1}"
        location = self._locations[actor_index]
        node = f"node {location.get('ip', '?')} ({location.get('node_id', '?')[:12]})" if location else "its node"
        return f"{envs} on {node}"

    def _gather(self, refs: list, what: str) -> list:
        """``ray.get`` the actors' answers in order, turning every failure into a VecEnvWorkerError."""
        ray = _ray()
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        try:
            ready, not_ready = ray.wait(refs, num_returns=len(refs), timeout=self.timeout)
            if not_ready:
                late = [self._where(refs.index(ref)) for ref in not_ready]
                raise VecEnvWorkerError(f"RayVecEnv: no answer to {what} within {self.timeout} s from "
                                        f"{'; '.join(late)}")
            results = []
            for index, ref in enumerate(refs):
                try:
                    results.append(ray.get(ref))
                except RayTaskError as exc:
                    cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                    raise VecEnvWorkerError(f"RayVecEnv: {self._where(index)} raised {type(cause).__name__} during "
                                            f"{what}: {cause}\n{exc}") from None
                except RayActorError as exc:
                    detail = "\n".join(str(exc).splitlines()[:12])
                    raise VecEnvWorkerError(f"RayVecEnv: the actor of {self._where(index)} died during {what}; "
                                            "the envs it held are lost: close() this RayVecEnv and make a new one "
                                            f"({type(exc).__name__}: {detail})") from None
                except GetTimeoutError:  # pragma: no cover - ray.wait above already waited
                    raise VecEnvWorkerError(f"RayVecEnv: no answer to {what} from {self._where(index)}") from None
            return results
        except KeyboardInterrupt:
            self.close()
            raise

    def _call(self, method: str, *args: Any) -> list:
        return self._gather([getattr(actor, method).remote(*args) for actor in self._actors], method)

    def _concat_obs(self, parts: list) -> Any:
        if isinstance(self.observation_space, spaces.Dict):
            return {key: np.concatenate([part[key] for part in parts]) for key in self.observation_space.spaces}
        if isinstance(self.observation_space, spaces.Tuple):
            return tuple(np.concatenate([part[i] for part in parts]) for i in range(len(self.observation_space)))
        return np.concatenate(parts)

    def _by_actor(self, indices: Indices) -> Dict[int, List[int]]:
        """Global env indices grouped by actor, as the actors' local indices."""
        grouped: Dict[int, List[int]] = {}
        for index in self._get_indices(indices):
            index = int(index)
            if not 0 <= index < self.num_envs:
                raise IndexError(f"RayVecEnv has {self.num_envs} envs; there is no env {index}")
            actor = next(a for a, (start, stop) in enumerate(self._slices) if start <= index < stop)
            grouped.setdefault(actor, []).append(index - self._slices[actor][0])
        return grouped

    def _per_env(self, method: str, indices: Indices, *args: Any) -> List[Any]:
        grouped = self._by_actor(indices)
        refs = [getattr(self._actors[actor], method).remote(*args, local) for actor, local in grouped.items()]
        answers = self._gather(refs, method)
        return [value for answer in answers for value in answer]

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> Any:
        self._pending = None
        return self._concat_obs(self._call("reset"))

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        self._pending = [actor.step.remote(actions[start:stop])
                         for actor, (start, stop) in zip(self._actors, self._slices)]

    def step_wait(self) -> Any:
        if self._pending is None:
            raise RuntimeError("RayVecEnv.step_wait() without step_async(): call step(actions)")
        refs, self._pending = self._pending, None
        results = self._gather(refs, "step")
        obs = self._concat_obs([result[0] for result in results])
        rewards = np.concatenate([result[1] for result in results]).astype(np.float32, copy=False)
        dones = np.concatenate([result[2] for result in results]).astype(bool, copy=False)
        infos = [info for result in results for info in result[3]]
        return obs, rewards, dones, infos

    def seed(self, seed: Optional[int] = None) -> List[Optional[int]]:
        seed = self._draw_seed(seed)
        self._gather([actor.seed.remote(seed + start) for actor, (start, _) in zip(self._actors, self._slices)],
                     "seed")
        self.action_space.seed(seed)
        return [seed + i for i in range(self.num_envs)]

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        return self._per_env("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        self._per_env("set_attr", indices, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None,
                   **method_kwargs: Any) -> List[Any]:
        return self._per_env("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> List[bool]:
        """Whether each env has a ``wrapper_class`` wrapper (stable-baselines3's ``env_is_wrapped``)."""
        return self._per_env("env_is_wrapped", indices, wrapper_class)

    def get_images(self) -> Sequence[np.ndarray]:
        return [image for images in self._call("get_images") for image in images]

    @property
    def nodes(self) -> List[Dict[str, str]]:
        """Where each env runs: ``{"node_id", "ip", "pid"}`` (the actor's process) per env."""
        return [self._locations[a] for a, (start, stop) in enumerate(self._slices) for _ in range(start, stop)]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        ray = _ray()
        if not ray.is_initialized():
            return
        closing = [actor.close.remote() for actor in self._actors]
        try:
            ray.wait(closing, num_returns=len(closing), timeout=5.0)
        except Exception:  # noqa: BLE001 - a dead actor cannot close its envs; it is killed below anyway
            pass
        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already dead
                pass
