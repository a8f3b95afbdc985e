"""
Ctrl-C consistency: a KeyboardInterrupt at any point of ``learn()`` leaves a model whose ``predict`` equals that of
the file it saves, for every registered algorithm (``sbtf.algorithms.all_algorithms()``: SB2's, sb3-contrib's and
any ``sbtf.sb3`` class present).

The interrupt is raised from a callback (``on_step`` after some training, ``on_rollout_end``, ``on_rollout_start``)
and from inside a compiled train step (right after its compiled call returned: where a real Ctrl-C that arrived
while TensorFlow ran is delivered). After each interrupt the model is saved, loaded back, and both act
deterministically on the same observations.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from sbtf import algorithms
from sbtf.common.compile import fast_call
from sbtf.common.callbacks import BaseCallback

# small, fast settings: every algorithm trains within a few dozen environment steps
_SMALL = {
    "A2C": dict(n_steps=5),
    "ACER": dict(n_steps=5, buffer_size=200, replay_start=10),
    "ACKTR": dict(n_steps=8),
    "DDPG": dict(nb_rollout_steps=10, nb_train_steps=3, batch_size=8, buffer_size=500, normalize_observations=True,
                 normalize_returns=True),
    "DQN": dict(learning_starts=10, batch_size=8, buffer_size=500, target_network_update_freq=15,
                exploration_fraction=0.5),
    "GAIL": dict(timesteps_per_batch=32, vf_iters=1, g_step=1, d_step=1),
    "PPO1": dict(timesteps_per_actorbatch=32, optim_batchsize=16, optim_epochs=2),
    "PPO2": dict(n_steps=16, nminibatches=2, noptepochs=2),
    "SAC": dict(learning_starts=10, batch_size=8, buffer_size=500),
    "TD3": dict(learning_starts=10, batch_size=8, buffer_size=500, train_freq=5, gradient_steps=5),
    "TRPO": dict(timesteps_per_batch=32, vf_iters=1),
    "ARS": dict(n_delta=2, n_top=2, n_eval_episodes=1),
    "QRDQN": dict(learning_starts=10, batch_size=8, buffer_size=500, target_update_interval=15),
    "RecurrentPPO": dict(n_steps=16, batch_size=16, n_epochs=2),
    "TQC": dict(learning_starts=10, batch_size=8, buffer_size=500),
    "MaskablePPO": dict(n_steps=16, batch_size=16, n_epochs=2),
    "trpo_contrib": dict(n_steps=32, batch_size=32, n_critic_updates=1),
}
# generic small settings for classes not listed above (e.g. sbtf.sb3's), kept where the constructor takes them
_GENERIC = dict(n_steps=16, batch_size=8, n_epochs=2, learning_starts=10, buffer_size=500, train_freq=4,
                gradient_steps=2, target_update_interval=15)


def _expert_dataset():
    from sbtf.gail import ExpertDataset

    rng = np.random.default_rng(0)
    obs = rng.uniform(-0.05, 0.05, (64, 4)).astype(np.float32)
    actions = rng.integers(0, 2, (64, 1))
    starts = np.zeros(64, bool)
    starts[::16] = True
    return ExpertDataset(traj_data=dict(obs=obs, actions=actions, rewards=np.ones(64, np.float32),
                                        episode_returns=np.full(4, 16.0), episode_starts=starts), verbose=0)


def _build(algo: algorithms.Algorithm):
    cls = algo.load()
    key = algo.cli_name if algo.cli_name in _SMALL else algo.name
    if algo.name == "HER":
        from sbtf import SAC
        from sbtf.common.bit_flipping_env import BitFlippingEnv

        env = BitFlippingEnv(4, continuous=True, max_steps=4)
        model = cls("MlpPolicy", env, SAC, n_sampled_goal=2, seed=0, policy_kwargs=dict(layers=[16]),
                    **_SMALL["SAC"])
        return model, lambda: {k: np.stack([v] * 3) for k, v in env.reset(seed=1)[0].items()}
    if algo.name == "MaskablePPO":
        from sbtf.contrib.common.maskable.envs import InvalidActionEnvDiscrete

        env = InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2)
        model = cls("MlpPolicy", env, seed=0, **_SMALL[key])
        return model, lambda: np.stack([env.reset(seed=s)[0] for s in range(3)])
    parameters = inspect.signature(cls.__init__).parameters
    continuous = algo.name in ("DDPG", "SAC", "TD3", "TQC") or (
        algo.target.startswith("sbtf.sb3") and algo.name in ("SAC", "TD3", "DDPG"))
    env_id = "Pendulum-v1" if continuous else "CartPole-v1"
    sb3 = algo.target.startswith("sbtf.sb3")
    small = None if sb3 else _SMALL.get(key)
    kwargs = dict(small if small is not None else {k: v for k, v in _GENERIC.items() if k in parameters})
    if algo.name == "GAIL":
        kwargs["expert_dataset"] = _expert_dataset()
    if "policy_kwargs" in parameters and algo.name not in ("ARS",):
        kwargs["policy_kwargs"] = dict(net_arch=[16]) if algo.name in ("RecurrentPPO", "TQC", "QRDQN", "MaskablePPO") \
            or algo.target.startswith(("sbtf.sb3", "sbtf.contrib")) else dict(layers=[16])
    if algo.name == "DDPG":
        from sbtf.common.noise import NormalActionNoise

        kwargs["action_noise"] = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
    policy = "MlpLstmPolicy" if algo.name == "RecurrentPPO" else "MlpPolicy"
    model = cls(policy, env_id, seed=0, **kwargs)
    rng = np.random.default_rng(7)
    low = np.array([-1.0, -1.0, -8.0]) if continuous else np.array([-1.0, -1.0, -0.2, -1.0])
    obs = rng.uniform(low, -low, (6, low.size)).astype(np.float32)
    return model, lambda: obs


class _InterruptAt(BaseCallback):
    """Raises KeyboardInterrupt at the ``n``-th call of ``event`` (``on_step``, ``on_rollout_end`` ...)."""

    def __init__(self, event: str, n: int):
        super().__init__()
        self.event, self.n, self.calls = event, n, 0

    def _hit(self, event: str) -> None:
        if event == self.event:
            self.calls += 1
            if self.calls >= self.n:
                raise KeyboardInterrupt

    def _on_step(self) -> bool:
        self._hit("on_step")
        return True

    def _on_rollout_end(self) -> None:
        self._hit("on_rollout_end")

    def _on_rollout_start(self) -> None:
        self._hit("on_rollout_start")


def _assert_consistent(model, obs_fn, tmp_path, tag: str) -> None:
    path = tmp_path / f"{tag}.zip"
    model.save(path)
    loaded = type(model).load(path)
    obs = obs_fn()
    if type(model).__name__ == "MaskablePPO":
        masks = np.ones((len(obs), 5), bool)
        ours, theirs = model.predict(obs, deterministic=True, action_masks=masks)[0], \
            loaded.predict(obs, deterministic=True, action_masks=masks)[0]
    else:
        ours, theirs = model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0]
    np.testing.assert_array_equal(ours, theirs, err_msg=f"predict differs from the saved file after {tag}")
    # the model's own parameters equal the file's
    ours, theirs = _flat(model.get_parameters()), _flat(loaded.get_parameters())
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=f"{name} after {tag}")


def _flat(params, prefix: str = "") -> dict:
    """``get_parameters()`` as one flat dict (SB3's is nested: ``{"policy": {...}, ...}``)."""
    out = {}
    for name, value in params.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{name}/"))
        else:
            out[f"{prefix}{name}"] = np.asarray(value)
    return out


def _learn_interrupted(model, callback, steps: int = 1000, raises: bool = True) -> bool:
    """``model.learn`` until the KeyboardInterrupt; whether it was raised (``raises``: it must be)."""
    try:
        model.learn(steps, callback=callback, reset_num_timesteps=False)
    except KeyboardInterrupt:
        return True
    if raises:
        pytest.fail("learn() ended without the KeyboardInterrupt")
    return False


_IDS = [a.cli_name for a in algorithms.all_algorithms()]


@pytest.fixture(params=algorithms.all_algorithms(), ids=_IDS)
def algo(request):
    return request.param


def test_interrupt_from_callbacks_and_train_step(algo, tmp_path, monkeypatch):
    # every train step built from here on runs through this wrapper, which can raise right after a compiled call
    armed = {"after": None, "calls": 0}
    original_build = fast_call.TrainStep._build

    def build(self, jit_compile):
        function = original_build(self, jit_compile)

        def call(*args):
            out = function(*args)
            if armed["after"] is not None:
                armed["calls"] += 1
                if armed["calls"] >= armed["after"]:
                    armed["after"] = None
                    raise KeyboardInterrupt
            return out

        return call

    monkeypatch.setattr(fast_call.TrainStep, "_build", build)
    model, obs_fn = _build(algo)
    # a first interrupt after some training (a few rollouts / gradient steps)
    _learn_interrupted(model, _InterruptAt("on_step", 70))
    _assert_consistent(model, obs_fn, tmp_path, "on_step 70")
    for event, n in (("on_rollout_end", 2), ("on_rollout_start", 3)):
        _learn_interrupted(model, _InterruptAt(event, n))
        _assert_consistent(model, obs_fn, tmp_path, f"{event} {n}")
    # from inside a compiled train step: after its compiled call returned (where a Ctrl-C that arrived while
    # TensorFlow ran is delivered), for the 1st and the 3rd train-step call of a learn()
    for after in (1, 3):
        armed.update(after=after, calls=0)
        if _learn_interrupted(model, None, raises=algo.name != "ARS"):
            _assert_consistent(model, obs_fn, tmp_path, f"train step call {after}")
