"""A VecEnv that runs each environment in its own process."""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import traceback
from collections import OrderedDict
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
from gymnasium import spaces

from sbtf.common.envs.gym_compat import wrap_env
from sbtf.common.vec_env.base_vec_env import CloudpickleWrapper, Indices, VecEnv
from sbtf.common.vec_env.dummy_vec_env import _get_env_attr, _render_frame, _set_env_attr
from sbtf.common.vec_env.util import is_wrapped, obs_space_info


class VecEnvWorkerError(RuntimeError):
    """
    Raised in the parent process when an environment running in a ``SubprocVecEnv`` worker raised an exception or
    when a worker process died.
    """


def _format_exception(exc: BaseException) -> Tuple[str, str, str]:
    return type(exc).__name__, str(exc), traceback.format_exc()


def _worker(remote: multiprocessing.connection.Connection, parent_remote: multiprocessing.connection.Connection,
            env_fn_wrapper: CloudpickleWrapper) -> None:
    """
    The loop run by each worker process: create the env, send its spaces, then serve commands until 'close'.
    Every command is answered with ``('ok', result)`` or ``('error', (exception name, message, traceback))``.
    """
    parent_remote.close()
    try:
        env = wrap_env(env_fn_wrapper.var())
        remote.send(("ok", (env.observation_space, env.action_space)))
    except BaseException as exc:  # noqa: B902 -- report anything, the parent raises it
        remote.send(("error", _format_exception(exc)))
        remote.close()
        return
    while True:
        try:
            cmd, data = remote.recv()
        except (EOFError, KeyboardInterrupt):
            # The parent is gone (or the user pressed Ctrl-C): nobody to serve any more.
            break
        try:
            if cmd == "step":
                observation, reward, terminated, truncated, info = env.step(data)
                done = terminated or truncated
                if done:
                    info["TimeLimit.truncated"] = bool(truncated and not terminated)
                    info["terminal_observation"] = observation
                    observation, _ = env.reset()
                remote.send(("ok", (observation, reward, done, info)))
            elif cmd == "reset":
                observation, reset_info = env.reset(seed=data)
                remote.send(("ok", (observation, reset_info)))
            elif cmd == "seed_action_space":
                env.action_space.seed(data)
                remote.send(("ok", None))
            elif cmd == "render":
                remote.send(("ok", _render_frame(env, data)))
            elif cmd == "close":
                env.close()
                break
            elif cmd == "get_attr":
                remote.send(("ok", _get_env_attr(env, data)))
            elif cmd == "set_attr":
                _set_env_attr(env, data[0], data[1])
                remote.send(("ok", None))
            elif cmd == "env_method":
                method = _get_env_attr(env, data[0])
                remote.send(("ok", method(*data[1], **data[2])))
            elif cmd == "is_wrapped":
                remote.send(("ok", is_wrapped(env, data)))
            else:
                raise NotImplementedError("SubprocVecEnv worker: unknown command {!r}".format(cmd))
        except Exception as exc:  # the env failed: tell the parent, keep serving (e.g. a close())
            try:
                remote.send(("error", _format_exception(exc)))
            except Exception:
                break
    remote.close()


def _flatten_obs(obs: Sequence[Any], space: spaces.Space) -> Any:
    """Stack the per-env observations into batched arrays (dict / tuple of arrays for Dict / Tuple spaces)."""
    keys, _, dtypes = obs_space_info(space)
    if isinstance(space, spaces.Dict):
        return OrderedDict([(k, np.array([o[k] for o in obs], dtype=dtypes[k])) for k in keys])
    if isinstance(space, spaces.Tuple):
        return tuple(np.array([o[i] for o in obs], dtype=dtypes[i]) for i in keys)
    return np.array(obs, dtype=dtypes[None])


class SubprocVecEnv(VecEnv):
    """
    Runs every environment in a worker process of its own and talks to it through a pipe. Worth it when one env
    step costs much more than the inter-process round trip (physics simulators, emulators); for cheap envs such as
    CartPole, ``DummyVecEnv`` is faster. More workers than CPU cores rarely helps unless the envs wait on I/O.

    An exception raised by an env is re-raised in the parent as :class:`VecEnvWorkerError` (with the worker's
    traceback), and a worker process that dies makes the parent raise the same error instead of waiting forever.

    .. warning::

        With the default 'forkserver' / 'spawn' start methods the workers import the script's main module again, so
        a script that creates a ``SubprocVecEnv`` at top level needs an ``if __name__ == "__main__":`` guard.

    :param env_fns: ([callable]) A list of functions that will create the environments (each call should return a
        new instance; gymnasium or old-gym-API envs).
    :param start_method: (str) method used to start the subprocesses: 'fork', 'forkserver' or 'spawn'.
        Defaults to 'forkserver' when available and 'spawn' otherwise.
    """

    def __init__(self, env_fns: List[Callable[[], Any]], start_method: Optional[str] = None):
        self.waiting = False
        self.closed = False
        self._pending: List[int] = []
        self._send_errors: List[VecEnvWorkerError] = []
        n_envs = len(env_fns)
        if n_envs == 0:
            raise ValueError("SubprocVecEnv needs at least one env function")

        if start_method is None:
            # As in stable-baselines: 'fork' is unsafe once threads exist in the parent (TensorFlow starts many),
            # so prefer a fresh interpreter per worker.
            forkserver_available = 'forkserver' in multiprocessing.get_all_start_methods()
            start_method = 'forkserver' if forkserver_available else 'spawn'
        self.start_method = start_method
        ctx = multiprocessing.get_context(start_method)

        pipes = [ctx.Pipe(duplex=True) for _ in range(n_envs)]
        self.remotes = [parent_end for parent_end, _ in pipes]
        self.work_remotes = [child_end for _, child_end in pipes]
        self.processes = []
        for work_remote, remote, env_fn in zip(self.work_remotes, self.remotes, env_fns):
            args = (work_remote, remote, CloudpickleWrapper(env_fn))
            # Daemonic, so that workers never outlive a parent that crashed.
            process = ctx.Process(target=_worker, args=args, daemon=True)
            process.start()
            self.processes.append(process)
            work_remote.close()

        try:
            env_spaces = self._recv_all(range(n_envs))
        except BaseException:
            self._shutdown(graceful=False)
            raise
        observation_space, action_space = env_spaces[0]
        VecEnv.__init__(self, n_envs, observation_space, action_space)
        self._seeds: List[Optional[int]] = [None] * n_envs
        self.reset_infos: List[dict] = [{} for _ in range(n_envs)]

    # ----- communication helpers -----
    def _worker_died(self, idx: int) -> VecEnvWorkerError:
        process = self.processes[idx]
        process.join(timeout=1.0)
        return VecEnvWorkerError(
            "SubprocVecEnv: the worker process of env {} (pid {}) died unexpectedly (exit code {}). The env crashed "
            "the process (e.g. a segfault or os._exit in the env); the VecEnv cannot be used any more, close() it "
            "and create a new one.".format(idx, process.pid, process.exitcode))

    def _send(self, idx: int, message: Tuple[str, Any]) -> None:
        if self.closed:
            raise RuntimeError("SubprocVecEnv: trying to use a VecEnv that was closed")
        try:
            self.remotes[idx].send(message)
        except (BrokenPipeError, EOFError, ConnectionResetError) as exc:
            raise self._worker_died(idx) from exc

    def _recv(self, idx: int) -> Any:
        remote = self.remotes[idx]
        process = self.processes[idx]
        if not remote.poll():
            # Wait for an answer or for the worker to exit, whichever comes first.
            multiprocessing.connection.wait([remote, process.sentinel])
        try:
            if not remote.poll():
                raise EOFError
            status, payload = remote.recv()
        except (EOFError, ConnectionResetError, OSError) as exc:
            raise self._worker_died(idx) from exc
        if status == "error":
            name, message, worker_traceback = payload
            raise VecEnvWorkerError("SubprocVecEnv: env {} raised {}: {}\n\nTraceback in the worker process:\n{}"
                                    .format(idx, name, message, worker_traceback))
        return payload

    def _recv_all(self, indices: Sequence[int]) -> List[Any]:
        """Receive one answer from each of the given workers (all of them, even after an error, so that the pipes
        stay in step), then raise the first error if there was one."""
        results = []
        first_error: Optional[VecEnvWorkerError] = None
        for idx in indices:
            try:
                results.append(self._recv(idx))
            except VecEnvWorkerError as exc:
                results.append(None)
                if first_error is None:
                    first_error = exc
        if first_error is not None:
            raise first_error
        return results

    def _send_all(self, indices: Sequence[int], cmd: str, data: Sequence[Any]) -> None:
        """Send one command to each of the given workers; the ones that could not be reached are remembered in
        ``self._send_errors`` (raised by ``_finish``), the others in ``self._pending``."""
        self._pending = []
        self._send_errors = []
        for idx, item in zip(indices, data):
            try:
                self._send(idx, (cmd, item))
                self._pending.append(idx)
            except VecEnvWorkerError as exc:
                self._send_errors.append(exc)

    def _finish(self) -> List[Any]:
        """Receive the answers of the workers that were sent a command, then raise the first error if any."""
        pending, send_errors = self._pending, self._send_errors
        self._pending, self._send_errors = [], []
        try:
            results = self._recv_all(pending)
        except VecEnvWorkerError as exc:
            if send_errors:  # the first error is the one reported; the later receive error stays attached
                raise send_errors[0] from exc
            raise
        if send_errors:
            raise send_errors[0]
        return results

    def _call_all(self, indices: Sequence[int], cmd: str, data: Sequence[Any]) -> List[Any]:
        self._send_all(indices, cmd, data)
        return self._finish()

    # ----- VecEnv API -----
    def step_async(self, actions: np.ndarray) -> None:
        self._send_all(range(self.num_envs), "step", [actions[idx] for idx in range(self.num_envs)])
        self.waiting = True

    def step_wait(self):
        try:
            results = self._finish()
        finally:
            self.waiting = False
        obs, rews, dones, infos = zip(*results)
        return (_flatten_obs(obs, self.observation_space), np.array(rews, dtype=np.float32),
                np.array(dones, dtype=bool), list(infos))

    def seed(self, seed: Optional[int] = None) -> List[Union[None, int]]:
        seed = self._draw_seed(seed)
        self._seeds = [seed + idx for idx in range(self.num_envs)]
        self.action_space.seed(seed)
        self._call_all(range(self.num_envs), "seed_action_space", self._seeds)
        return list(self._seeds)

    def reset(self):
        results = self._call_all(range(self.num_envs), "reset", self._seeds)
        self._seeds = [None] * self.num_envs
        obs, self.reset_infos = zip(*results)
        self.reset_infos = list(self.reset_infos)
        return _flatten_obs(obs, self.observation_space)

    def close(self) -> None:
        if self.closed:
            return
        self._shutdown(graceful=True)

    def _shutdown(self, graceful: bool) -> None:
        if graceful:
            if self.waiting:
                try:
                    self._finish()
                except VecEnvWorkerError:
                    pass
                self.waiting = False
            for remote, process in zip(self.remotes, self.processes):
                if process.is_alive():
                    try:
                        remote.send(("close", None))
                    except (BrokenPipeError, EOFError, ConnectionResetError, OSError):
                        pass
        for process in self.processes:
            process.join(timeout=5.0 if graceful else 0.1)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5.0)
        for remote in self.remotes:
            remote.close()
        self.closed = True

    def get_images(self) -> Sequence[np.ndarray]:
        images = self._call_all(range(self.num_envs), "render", ["rgb_array"] * self.num_envs)
        for idx, image in enumerate(images):
            if not isinstance(image, np.ndarray):
                raise ValueError("env {} returned {} from render(), not an RGB array: make the envs with "
                                 "render_mode='rgb_array'".format(idx, type(image).__name__))
        return images

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        """Return attribute from vectorized environment (see base class)."""
        indices = list(self._get_indices(indices))
        return self._call_all(indices, "get_attr", [attr_name] * len(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """Set attribute inside vectorized environments (see base class)."""
        indices = list(self._get_indices(indices))
        self._call_all(indices, "set_attr", [(attr_name, value)] * len(indices))

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None,
                   **method_kwargs: Any) -> List[Any]:
        """Call instance methods of vectorized environments."""
        indices = list(self._get_indices(indices))
        return self._call_all(indices, "env_method", [(method_name, method_args, method_kwargs)] * len(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> List[bool]:
        """Whether each env has a ``wrapper_class`` wrapper (stable-baselines3's ``env_is_wrapped``)."""
        indices = list(self._get_indices(indices))
        return self._call_all(indices, "is_wrapped", [wrapper_class] * len(indices))

    def _get_target_remotes(self, indices: Indices) -> List[multiprocessing.connection.Connection]:
        """
        The pipes (parent ends) of the workers of the given envs.

        :param indices: (None,int,Iterable) refers to indices of envs.
        :return: ([multiprocessing.Connection]) one pipe per env
        """
        indices = self._get_indices(indices)
        return [self.remotes[i] for i in indices]
