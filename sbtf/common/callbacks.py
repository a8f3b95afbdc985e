"""Training callbacks (stable-baselines 2.x ``common/callbacks.py``, plus stable-baselines3's
``ProgressBarCallback``).

A model's ``learn()`` drives a callback as follows (see docs/architecture.md)::

    callback = self._init_callback(callback)       # None, a function, a list or a BaseCallback
    callback.on_training_start(locals(), globals())
    # per rollout
    callback.on_rollout_start()
    # per env step
    callback.update_locals(locals())
    if callback.on_step() is False: stop
    callback.on_rollout_end()
    callback.on_training_end()

``on_step()`` always returns a bool: a ``_on_step`` (or an old-style function callback) that
returns None counts as "continue", as in stable-baselines where only ``False`` stopped training.
"""
from __future__ import annotations

import os
import warnings
from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from sbtf import logger

__all__ = [
    "BaseCallback", "EventCallback", "CallbackList", "ConvertCallback", "CheckpointCallback", "EvalCallback",
    "StopTrainingOnRewardThreshold", "StopTrainingOnNoModelImprovement", "EveryNTimesteps", "ProgressBarCallback",
]


def _keep_going(result: Any) -> bool:
    """``None`` means continue; anything else is read as a truth value (False stops training)."""
    return True if result is None else bool(result)


class BaseCallback(ABC):
    """
    Base class for callback.

    :param verbose: (int)
    """

    def __init__(self, verbose: int = 0):
        super(BaseCallback, self).__init__()
        # The RL model
        self.model: Any = None
        # An alias for self.model.get_env(), the environment used for training
        self.training_env: Any = None
        # Number of time the callback was called
        self.n_calls = 0  # type: int
        # n_envs * n times env.step() was called
        self.num_timesteps = 0  # type: int
        self.verbose = verbose
        self.locals: Optional[Dict[str, Any]] = None
        self.globals: Optional[Dict[str, Any]] = None
        self.logger: Optional[logger.Logger] = None
        # Sometimes, for event callback, it is useful
        # to have access to the parent object
        self.parent: Optional[BaseCallback] = None

    # Type hint as string to avoid circular import
    def init_callback(self, model: Any) -> None:
        """
        Initialize the callback by saving references to the
        RL model and the training environment for convenience.
        """
        self.model = model
        self.training_env = model.get_env()
        self.logger = logger.Logger.CURRENT
        self._init_callback()

    def _init_callback(self) -> None:
        pass

    def on_training_start(self, locals_: Dict[str, Any], globals_: Dict[str, Any]) -> None:
        # Those are reference and will be updated automatically
        self.locals = locals_
        self.globals = globals_
        self._on_training_start()

    def _on_training_start(self) -> None:
        pass

    def on_rollout_start(self) -> None:
        self._on_rollout_start()

    def _on_rollout_start(self) -> None:
        pass

    @abstractmethod
    def _on_step(self) -> bool:
        """
        :return: (bool) If the callback returns False, training is aborted early.
        """
        return True

    def on_step(self) -> bool:
        """
        This method will be called by the model after each call to `env.step()`.

        For child callback (of an `EventCallback`), this will be called
        when the event is triggered.

        :return: (bool) If the callback returns False, training is aborted early.
        """
        self.n_calls += 1
        self.num_timesteps = self.model.num_timesteps

        return _keep_going(self._on_step())

    def on_training_end(self) -> None:
        self._on_training_end()

    def _on_training_end(self) -> None:
        pass

    def on_rollout_end(self) -> None:
        self._on_rollout_end()

    def _on_rollout_end(self) -> None:
        pass

    def update_locals(self, locals_: Dict[str, Any]) -> None:
        """
        Updates the local variables of the training process

        For reference to which variables are accessible,
        check each individual algorithm's documentation

        :param locals_: (Dict[str, Any]) current local variables
        """
        if self.locals is None:
            self.locals = {}
        self.locals.update(locals_)
        self.update_child_locals(locals_)

    def update_child_locals(self, locals_: Dict[str, Any]) -> None:
        """
        Update the references to the local variables on sub callbacks.

        :param locals_: (Dict[str, Any]) the local variables during rollout collection
        """
        pass


class EventCallback(BaseCallback):
    """
    Base class for triggering callback on event.

    :param callback: (Optional[BaseCallback]) Callback that will be called
        when an event is triggered.
    :param verbose: (int)
    """

    def __init__(self, callback: Optional[BaseCallback] = None, verbose: int = 0):
        super(EventCallback, self).__init__(verbose=verbose)
        self.callback = callback
        # Give access to the parent
        if callback is not None:
            self.callback.parent = self

    def init_callback(self, model: Any) -> None:
        super(EventCallback, self).init_callback(model)
        if self.callback is not None:
            self.callback.init_callback(self.model)

    def _on_training_start(self) -> None:
        if self.callback is not None:
            self.callback.on_training_start(self.locals, self.globals)

    def _on_event(self) -> bool:
        if self.callback is not None:
            return self.callback.on_step()
        return True

    def _on_step(self) -> bool:
        return True

    def update_child_locals(self, locals_: Dict[str, Any]) -> None:
        if self.callback is not None:
            self.callback.update_locals(locals_)


class CallbackList(BaseCallback):
    """
    Class for chaining callbacks.

    :param callbacks: (List[BaseCallback]) A list of callbacks that will be called
        sequentially (old-style functions are wrapped in a ``ConvertCallback``).
    """

    def __init__(self, callbacks: List[BaseCallback]):
        super(CallbackList, self).__init__()
        if not isinstance(callbacks, (list, tuple)):
            raise TypeError("CallbackList expects a list of callbacks, got {!r}".format(callbacks))
        self.callbacks = [cb if isinstance(cb, BaseCallback) else ConvertCallback(cb) for cb in callbacks]

    def _init_callback(self) -> None:
        for callback in self.callbacks:
            callback.init_callback(self.model)

    def _on_training_start(self) -> None:
        for callback in self.callbacks:
            callback.on_training_start(self.locals, self.globals)

    def _on_rollout_start(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_start()

    def _on_step(self) -> bool:
        continue_training = True
        for callback in self.callbacks:
            # Return False (stop training) if at least one callback returns False
            continue_training = callback.on_step() and continue_training
        return continue_training

    def _on_rollout_end(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_end()

    def _on_training_end(self) -> None:
        for callback in self.callbacks:
            callback.on_training_end()

    def update_child_locals(self, locals_: Dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.update_locals(locals_)


class CheckpointCallback(BaseCallback):
    """
    Callback for saving a model every `save_freq` steps

    :param save_freq: (int) save every ``save_freq`` calls of the callback
    :param save_path: (str) Path to the folder where the model will be saved.
    :param name_prefix: (str) Common prefix to the saved models
    :param verbose: (int)
    """

    def __init__(self, save_freq: int, save_path: str, name_prefix: str = "rl_model", verbose: int = 0):
        super(CheckpointCallback, self).__init__(verbose)
        if save_freq < 1:
            raise ValueError("save_freq must be a positive number of calls, got {}".format(save_freq))
        self.save_freq = save_freq
        self.save_path = save_path
        self.name_prefix = name_prefix

    def _init_callback(self) -> None:
        # Create folder if needed
        if self.save_path is not None:
            os.makedirs(self.save_path, exist_ok=True)

    def _on_step(self) -> bool:
        if self.n_calls % self.save_freq == 0:
            path = os.path.join(self.save_path, "{}_{}_steps".format(self.name_prefix, self.num_timesteps))
            self.model.save(path)
            if self.verbose > 1:
                print("Saving model checkpoint to {}".format(path))
        return True


class ConvertCallback(BaseCallback):
    """
    Convert functional callback (old-style) to object.

    :param callback: (Callable) ``callback(locals_, globals_) -> bool``; returning False stops
        training, None (no return) continues
    :param verbose: (int)
    """

    def __init__(self, callback: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]], verbose: int = 0):
        super(ConvertCallback, self).__init__(verbose)
        if callback is not None and not callable(callback):
            raise TypeError(
                "ConvertCallback expects a function f(locals_, globals_) -> bool, got {!r}".format(callback)
            )
        self.callback = callback

    def _on_step(self) -> bool:
        if self.callback is not None:
            return _keep_going(self.callback(self.locals, self.globals))
        return True


class EvalCallback(EventCallback):
    """
    Callback for evaluating an agent.

    :param eval_env: (Union[gym.Env, VecEnv]) The environment used for initialization
        (a single env is put in a ``DummyVecEnv``; a VecEnv may hold several envs)
    :param callback_on_new_best: (Optional[BaseCallback]) Callback to trigger
        when there is a new best model according to the `mean_reward`
    :param n_eval_episodes: (int) The number of episodes to test the agent
    :param eval_freq: (int) Evaluate the agent every eval_freq call of the callback.
    :param log_path: (str) Path to a folder where the evaluations (`evaluations.npz`)
        will be saved. It will be updated at each evaluation.
    :param best_model_save_path: (str) Path to a folder where the best model
        according to performance on the eval env will be saved.
    :param deterministic: (bool) Whether the evaluation should
        use a stochastic or deterministic actions.
    :param render: (bool) Whether to render or not the environment during evaluation
    :param verbose: (int)
    :param warn: (bool) stable-baselines3's: warn when the evaluation env is not wrapped in a ``Monitor``
    :param callback_after_eval: (Optional[BaseCallback]) stable-baselines3's: called after every evaluation (e.g.
        ``StopTrainingOnNoModelImprovement``); its ``parent`` is this callback. Pass it by keyword: stable-baselines
        2's positions are kept (stable-baselines3 puts it third)
    """

    def __init__(
        self,
        eval_env: Any,
        callback_on_new_best: Optional[BaseCallback] = None,
        n_eval_episodes: int = 5,
        eval_freq: int = 10000,
        log_path: Optional[str] = None,
        best_model_save_path: Optional[str] = None,
        deterministic: bool = True,
        render: bool = False,
        verbose: int = 1,
        warn: bool = True,
        callback_after_eval: Optional[BaseCallback] = None,
    ):
        super(EvalCallback, self).__init__(callback_on_new_best, verbose=verbose)
        from sbtf.common.evaluation import _as_vec_env

        if isinstance(n_eval_episodes, BaseCallback):
            raise TypeError("EvalCallback(eval_env, callback_on_new_best, n_eval_episodes, ...): a callback was given "
                            "as n_eval_episodes; pass stable-baselines3's callback_after_eval by keyword "
                            "(callback_after_eval=...).")
        self.callback_on_new_best = callback_on_new_best
        self.callback_after_eval = callback_after_eval
        if callback_after_eval is not None:
            callback_after_eval.parent = self
        self.warn = warn
        self._is_success_buffer: List[bool] = []
        self.evaluations_successes: List[List[bool]] = []

        self.n_eval_episodes = n_eval_episodes
        self.eval_freq = eval_freq
        self.best_mean_reward = -np.inf
        self.last_mean_reward = -np.inf
        self.deterministic = deterministic
        self.render = render

        # Convert to VecEnv for consistency
        self.eval_env = _as_vec_env(eval_env)

        self.best_model_save_path = best_model_save_path
        # Logs will be written in `evaluations.npz`
        if log_path is not None:
            log_path = os.path.join(log_path, "evaluations")
        self.log_path = log_path
        self.evaluations_results: List[List[float]] = []
        self.evaluations_timesteps: List[int] = []
        self.evaluations_length: List[List[int]] = []

    def _init_callback(self) -> None:
        # Does not work in some corner cases, where the wrapper is not the same
        if type(self.training_env) is not type(self.eval_env):
            warnings.warn(
                "Training and eval env are not of the same type {} != {}".format(self.training_env, self.eval_env)
            )

        # Create folders if needed
        if self.best_model_save_path is not None:
            os.makedirs(self.best_model_save_path, exist_ok=True)
        if self.log_path is not None:
            os.makedirs(os.path.dirname(self.log_path), exist_ok=True)

    def init_callback(self, model: Any) -> None:
        super(EvalCallback, self).init_callback(model)
        if self.callback_after_eval is not None:
            self.callback_after_eval.init_callback(self.model)

    def _on_training_start(self) -> None:
        super(EvalCallback, self)._on_training_start()
        if self.callback_after_eval is not None:
            self.callback_after_eval.on_training_start(self.locals, self.globals)

    def update_child_locals(self, locals_: Dict[str, Any]) -> None:
        super(EvalCallback, self).update_child_locals(locals_)
        if self.callback_after_eval is not None:
            self.callback_after_eval.update_locals(locals_)

    def _log_success_callback(self, locals_: Dict[str, Any], globals_: Dict[str, Any]) -> None:
        """``evaluate_policy``'s per-step callback: keeps ``info["is_success"]`` of the episodes that end."""
        done = locals_.get("done")
        info = locals_.get("info")
        if done is None:  # a VecEnv: the step's dones and infos, env by env
            dones, infos = locals_.get("dones"), locals_.get("infos") or []
            pairs = zip(np.asarray(dones).reshape(-1), infos) if dones is not None else ()
        else:
            pairs = [(done, info)]
        for env_done, env_info in pairs:
            if env_done and isinstance(env_info, dict) and env_info.get("is_success") is not None:
                self._is_success_buffer.append(bool(env_info["is_success"]))

    def _on_step(self) -> bool:
        continue_training = True
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
            from sbtf.common.evaluation import evaluate_policy
            from sbtf.common.vec_env import sync_envs_normalization

            # Sync training and eval env if there is VecNormalize
            if self.training_env is not None:
                sync_envs_normalization(self.training_env, self.eval_env)

            self._is_success_buffer = []
            episode_rewards, episode_lengths = evaluate_policy(
                self.model,
                self.eval_env,
                n_eval_episodes=self.n_eval_episodes,
                render=self.render,
                deterministic=self.deterministic,
                return_episode_rewards=True,
                warn=self.warn,
                callback=self._log_success_callback,
            )

            if self.log_path is not None:
                self.evaluations_timesteps.append(self.num_timesteps)
                self.evaluations_results.append(list(episode_rewards))
                self.evaluations_length.append(list(episode_lengths))
                extra = {}
                if self._is_success_buffer:
                    self.evaluations_successes.append(list(self._is_success_buffer))
                    extra["successes"] = self.evaluations_successes
                np.savez(
                    self.log_path,
                    timesteps=self.evaluations_timesteps,
                    results=self.evaluations_results,
                    ep_lengths=self.evaluations_length,
                    **extra,
                )

            mean_reward, std_reward = float(np.mean(episode_rewards)), float(np.std(episode_rewards))
            mean_ep_length, std_ep_length = float(np.mean(episode_lengths)), float(np.std(episode_lengths))
            # Keep track of the last evaluation, useful for classes that derive from this callback
            self.last_mean_reward = mean_reward

            if self.verbose > 0:
                print(
                    "Eval num_timesteps={}, episode_reward={:.2f} +/- {:.2f}".format(
                        self.num_timesteps, mean_reward, std_reward
                    )
                )
                print("Episode length: {:.2f} +/- {:.2f}".format(mean_ep_length, std_ep_length))
            if self.logger is not None:  # stable-baselines3's keys, written with the next log block
                self.logger.record("eval/mean_reward", mean_reward)
                self.logger.record("eval/mean_ep_length", mean_ep_length)
            if self._is_success_buffer:
                success_rate = float(np.mean(self._is_success_buffer))
                if self.verbose > 0:
                    print("Success rate: {:.2f}%".format(100 * success_rate))
                if self.logger is not None:
                    self.logger.record("eval/success_rate", success_rate)

            if mean_reward > self.best_mean_reward:
                if self.verbose > 0:
                    print("New best mean reward!")
                if self.best_model_save_path is not None:
                    self.model.save(os.path.join(self.best_model_save_path, "best_model"))
                self.best_mean_reward = mean_reward
                # Trigger callback if needed
                if self.callback is not None:
                    continue_training = self._on_event()
            if self.callback_after_eval is not None:
                continue_training = self.callback_after_eval.on_step() and continue_training

        return continue_training


class StopTrainingOnRewardThreshold(BaseCallback):
    """
    Stop the training once a threshold in episodic reward
    has been reached (i.e. when the model is good enough).

    It must be used with the `EvalCallback`.

    :param reward_threshold: (float)  Minimum expected reward per episode
        to stop training.
    :param verbose: (int)
    """

    def __init__(self, reward_threshold: float, verbose: int = 0):
        super(StopTrainingOnRewardThreshold, self).__init__(verbose=verbose)
        self.reward_threshold = reward_threshold

    def _on_step(self) -> bool:
        if self.parent is None or not hasattr(self.parent, "best_mean_reward"):
            raise AssertionError("`StopTrainingOnRewardThreshold` callback must be used with an `EvalCallback`")
        # Convert np.bool_ to bool, otherwise callback.on_step() is False won't work
        continue_training = bool(self.parent.best_mean_reward < self.reward_threshold)
        if self.verbose > 0 and not continue_training:
            print(
                "Stopping training because the mean reward {:.2f} is above the threshold {}".format(
                    self.parent.best_mean_reward, self.reward_threshold
                )
            )
        return continue_training


class StopTrainingOnNoModelImprovement(BaseCallback):
    """
    Stop the training when the best mean reward of an ``EvalCallback`` did not improve for more than
    ``max_no_improvement_evals`` evaluations in a row (stable-baselines3). Give it to the ``EvalCallback`` as
    ``callback_after_eval``.

    :param max_no_improvement_evals: (int) evaluations in a row without a new best model that are tolerated
    :param min_evals: (int) evaluations before the counting starts
    :param verbose: (int) 1: say why the training stopped
    """

    def __init__(self, max_no_improvement_evals: int, min_evals: int = 0, verbose: int = 0):
        super(StopTrainingOnNoModelImprovement, self).__init__(verbose=verbose)
        self.max_no_improvement_evals = max_no_improvement_evals
        self.min_evals = min_evals
        self.last_best_mean_reward = -np.inf
        self.no_improvement_evals = 0

    def _on_step(self) -> bool:
        if self.parent is None or not hasattr(self.parent, "best_mean_reward"):
            raise AssertionError("``StopTrainingOnNoModelImprovement`` callback must be used with an "
                                 "``EvalCallback`` (as its callback_after_eval)")
        continue_training = True
        if self.n_calls > self.min_evals:
            if self.parent.best_mean_reward > self.last_best_mean_reward:
                self.no_improvement_evals = 0
            else:
                self.no_improvement_evals += 1
                if self.no_improvement_evals > self.max_no_improvement_evals:
                    continue_training = False
        self.last_best_mean_reward = self.parent.best_mean_reward
        if self.verbose > 0 and not continue_training:
            print("Stopping training because there was no new best model in the last {:d} evaluations".format(
                self.no_improvement_evals))
        return continue_training


class EveryNTimesteps(EventCallback):
    """
    Trigger a callback every `n_steps` timesteps

    :param n_steps: (int) Number of timesteps between two trigger.
    :param callback: (BaseCallback) Callback that will be called
        when the event is triggered.
    """

    def __init__(self, n_steps: int, callback: BaseCallback):
        super(EveryNTimesteps, self).__init__(callback)
        self.n_steps = n_steps
        self.last_time_trigger = 0

    def _on_step(self) -> bool:
        if (self.num_timesteps - self.last_time_trigger) >= self.n_steps:
            self.last_time_trigger = self.num_timesteps
            return self._on_event()
        return True


class ProgressBarCallback(BaseCallback):
    """
    Display a progress bar when training (stable-baselines3), used by ``learn(progress_bar=True)``.

    The bar's total is ``locals_["total_timesteps"]`` at training start (the steps of this
    ``learn()`` call) and it advances by the growth of ``model.num_timesteps``. Needs ``tqdm``.
    """

    def __init__(self) -> None:
        super(ProgressBarCallback, self).__init__()
        try:
            from tqdm.auto import tqdm
        except ImportError as exc:  # pragma: no cover - tqdm is a dependency of sbtf
            raise ImportError("You must install tqdm to use the progress bar callback (pip install tqdm)") from exc
        self._tqdm = tqdm
        self.pbar: Any = None
        self._start_timesteps = 0
        self._last_timesteps = 0

    def _on_training_start(self) -> None:
        total = None
        if self.locals is not None and self.locals.get("total_timesteps") is not None:
            total = int(self.locals["total_timesteps"])
        self._start_timesteps = self._last_timesteps = int(self.model.num_timesteps)
        self.pbar = self._tqdm(total=total)

    def _on_step(self) -> bool:
        current = int(self.model.num_timesteps)
        if self.pbar is not None and current > self._last_timesteps:
            self.pbar.update(current - self._last_timesteps)
        self._last_timesteps = current
        return True

    def _on_training_end(self) -> None:
        if self.pbar is not None:
            self.pbar.refresh()
            self.pbar.close()
            self.pbar = None
