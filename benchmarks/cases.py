"""Registry of side-by-side benchmark cases: sbtf (SB2 API on TF2) against stable-baselines3.

This module is imported by the harness (``run_benchmarks.py``) and by the worker
(``worker.py``) in *both* interpreters (the sbtf one and the SB3 venv), so it must
stay standard-library only and describe everything as plain data.

Adding a case is a few lines: add a ``Case`` to ``CASES`` with

* ``env_id``, ``n_envs`` (a ``DummyVecEnv`` of that many Monitor-wrapped envs is
  built on both sides with ``make_vec_env``), ``total_timesteps``;
* ``sb3``: a ``Side`` naming the SB3 class (``module`` defaults to
  ``stable_baselines3``; use ``sb3_contrib`` for TRPO & co) and its keyword
  arguments;
* ``sbtf``: a ``Side`` naming the sbtf class (``module`` defaults to ``sbtf``) and
  the *same* hyperparameters under their stable-baselines 2 names;
* ``notes``: every place where the two sides cannot be made identical.

Both sides always get ``verbose=0`` and ``seed=<run seed>`` from the worker; the
sbtf side also gets ``n_cpu_tf_sess=<threads>`` and the SB3 side ``device="cpu"``.
Action noise is given as data (``("normal", sigma)`` or
``("ornstein_uhlenbeck", sigma)``) and built by the worker with each library's
own noise class. In ``policy_kwargs``, activation functions may be given by name
(``"activation_fn": "relu"`` for SB3, ``"act_fun": "relu"`` for sbtf).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

LIBS = ("sbtf", "sb3")
LIB_LABELS = {"sbtf": "sbtf", "sb3": "SB3"}
DEFAULT_MODULES = {"sbtf": "sbtf", "sb3": "stable_baselines3"}


@dataclass
class Side:
    """How one library builds and trains the model of a case."""

    algo: str
    kwargs: dict = field(default_factory=dict)
    policy: str = "MlpPolicy"
    module: Optional[str] = None
    action_noise: Optional[Tuple[str, float]] = None
    learn_kwargs: dict = field(default_factory=dict)
    #: the env class as "module:Class" when the env is not a registered id (each library's own test env)
    env_entry: Optional[str] = None

    def module_name(self, lib: str) -> str:
        return self.module or DEFAULT_MODULES[lib]

    def to_dict(self, lib: str) -> dict:
        return {
            "module": self.module_name(lib),
            "algo": self.algo,
            "policy": self.policy,
            "kwargs": self.kwargs,
            "action_noise": list(self.action_noise) if self.action_noise else None,
            "learn_kwargs": self.learn_kwargs,
            "env_entry": self.env_entry,
        }

    def call_string(self, lib: str) -> str:
        """The constructor call as one line of Python, for the docs."""
        parts = [repr(self.policy), "env"]
        parts += [f"{k}={_fmt(v)}" for k, v in self.kwargs.items()]
        if self.action_noise:
            kind, sigma = self.action_noise
            cls = {"normal": "NormalActionNoise", "ornstein_uhlenbeck": "OrnsteinUhlenbeckActionNoise"}[kind]
            parts.append(f"action_noise={cls}(mean=0, sigma={sigma})")
        return f"{self.module_name(lib)}.{self.algo}({', '.join(parts)})"


@dataclass
class Case:
    name: str
    description: str
    env_id: str
    n_envs: int
    total_timesteps: int
    sbtf: Side
    sb3: Side
    notes: Tuple[str, ...] = ()
    eval_episodes: int = 10
    #: keyword arguments of the env (both sides)
    env_kwargs: dict = field(default_factory=dict)
    #: VecNormalize keyword arguments (both sides wrap the training env; evaluation normalises with its statistics)
    normalize: Optional[dict] = None
    #: the env has action_masks(): evaluation passes them to predict (MaskablePPO)
    masked: bool = False
    #: ``"dummy"`` or ``"subproc"``: the VecEnv class both sides build
    vec_env: str = "dummy"
    #: Atari: each library's ``make_atari_env`` (DeepMind wrappers, 84x84 grey frames) + ``VecFrameStack(4)``
    atari: bool = False
    #: recurrent policy: evaluation carries the LSTM state through each episode (``predict(obs, state, episode_start)``)
    recurrent: bool = False

    def side(self, lib: str) -> Side:
        return {"sbtf": self.sbtf, "sb3": self.sb3}[lib]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "env_id": self.env_id,
            "n_envs": self.n_envs,
            "total_timesteps": self.total_timesteps,
            "eval_episodes": self.eval_episodes,
            "sbtf": self.sbtf.to_dict("sbtf"),
            "sb3": self.sb3.to_dict("sb3"),
            "notes": list(self.notes),
            "env_kwargs": self.env_kwargs,
            "normalize": self.normalize,
            "masked": self.masked,
            "vec_env": self.vec_env,
            "atari": self.atari,
            "recurrent": self.recurrent,
        }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:_}"
    if isinstance(value, dict):
        return "dict(" + ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return repr(value)


_VF_CLIP_NOTE = (
    "SB2's `cliprange_vf=None` (its default) clips the value function with `cliprange`; SB3's "
    "`clip_range_vf=None` does not clip it. The sbtf side passes `cliprange_vf=-1`, SB2's way of "
    "turning value clipping off, so both run the same loss."
)
_PPO_TIMESTEPS_NOTE = (
    "SB3 rounds `total_timesteps` up to whole rollouts, SB2's PPO2 rounds it down, so the two "
    "sides do slightly different numbers of steps; steps/s is computed from each model's actual "
    "`num_timesteps`."
)

CASES: dict[str, Case] = {}


def _add(case: Case) -> None:
    assert case.name not in CASES, case.name
    CASES[case.name] = case


# --------------------------------------------------------------------------- PPO
_add(Case(
    name="ppo_cartpole_zoo",
    description="PPO on CartPole-v1 with the RL-zoo hyperparameters (constant learning rate and clip range), "
                "8 envs in a DummyVecEnv, MLP 64x64 tanh with separate policy and value networks.",
    env_id="CartPole-v1",
    n_envs=8,
    total_timesteps=100_000,
    sb3=Side("PPO", dict(
        n_steps=32, batch_size=256, n_epochs=20, gae_lambda=0.8, gamma=0.98, learning_rate=1e-3,
        clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
    )),
    sbtf=Side("PPO2", dict(
        n_steps=32, nminibatches=1, noptepochs=20, lam=0.8, gamma=0.98, learning_rate=1e-3,
        cliprange=0.2, cliprange_vf=-1, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
    )),
    notes=(
        "Minibatch: SB3 `batch_size=256` = SB2 `n_steps * n_envs / nminibatches` = 32 * 8 / 1.",
        _VF_CLIP_NOTE,
        _PPO_TIMESTEPS_NOTE,
    ),
))

_add(Case(
    name="ppo_cartpole_sb3_defaults",
    description="PPO on CartPole-v1 with SB3's default hyperparameters, one env, "
                "MLP 64x64 tanh with separate policy and value networks.",
    env_id="CartPole-v1",
    n_envs=1,
    total_timesteps=50_000,
    sb3=Side("PPO", dict(
        n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95,
        clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
    )),
    sbtf=Side("PPO2", dict(
        n_steps=2048, nminibatches=32, noptepochs=10, learning_rate=3e-4, gamma=0.99, lam=0.95,
        cliprange=0.2, cliprange_vf=-1, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
    )),
    notes=(
        "Minibatch: SB3 `batch_size=64` = SB2 `n_steps * n_envs / nminibatches` = 2048 / 32.",
        _VF_CLIP_NOTE,
        _PPO_TIMESTEPS_NOTE,
    ),
))

_PPO_ZOO_CARTPOLE = dict(
    n_steps=32, batch_size=256, n_epochs=20, gae_lambda=0.8, gamma=0.98, learning_rate=1e-3,
    clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
)
_add(Case(
    name="ppo_sb3_cartpole_zoo",
    description="stable-baselines3's PPO as sbtf.sb3.PPO against SB3's: the work of `ppo_cartpole_zoo` (the RL-zoo "
                "hyperparameters with a constant learning rate and clip range, 8 envs, MLP 64x64 tanh), with SB3's "
                "class and arguments on both sides.",
    env_id="CartPole-v1",
    n_envs=8,
    total_timesteps=100_000,
    sb3=Side("PPO", dict(_PPO_ZOO_CARTPOLE)),
    sbtf=Side("PPO", dict(_PPO_ZOO_CARTPOLE), module="sbtf.sb3"),
    notes=(
        "Same class name, arguments and defaults on both sides (sbtf.sb3 takes SB3's): per-minibatch advantage "
        "normalisation, no value clipping, PyTorch's Adam (eps 1e-5).",
        "`ppo_cartpole_zoo` runs the same work with stable-baselines 2's `sbtf.PPO2`: the two sbtf rows compare "
        "SB2's class and SB3's on one workload.",
    ),
))

# --------------------------------------------------------------------------- A2C
_add(Case(
    name="a2c_cartpole",
    description="A2C on CartPole-v1 with SB3's default hyperparameters, 8 envs in a DummyVecEnv, "
                "MLP 64x64 tanh with separate policy and value networks.",
    env_id="CartPole-v1",
    n_envs=8,
    total_timesteps=100_000,
    sb3=Side("A2C", dict(
        n_steps=5, learning_rate=7e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.0, vf_coef=0.5,
        max_grad_norm=0.5, rms_prop_eps=1e-5, use_rms_prop=True, normalize_advantage=False,
    )),
    sbtf=Side("A2C", dict(
        n_steps=5, learning_rate=7e-4, gamma=0.99, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
        alpha=0.99, epsilon=1e-5, lr_schedule="constant", rms_prop_style="torch",
    )),
    notes=(
        "SB3's default optimizer is PyTorch's RMSprop (alpha 0.99, eps 1e-5: mean square starting at 0, eps "
        "added after the square root); SB2's is TF1's (mean square starting at 1, eps inside the root). The sbtf "
        "side runs the same maths as SB3 with `rms_prop_style='torch'`. With sbtf's default `'tf'` (SB2's "
        "optimizer) A2C learns more slowly on this budget: mean deterministic eval 311 over 6 seeds at 100k steps "
        "vs 477 with `'torch'` (measured 2026-11-22).",
        "SB3's `gae_lambda=1.0` gives plain n-step returns, which is what SB2's A2C computes (it has no GAE).",
    ),
))

_add(Case(
    name="a2c_sb3_cartpole",
    description="stable-baselines3's A2C as sbtf.sb3.A2C against SB3's: the work of `a2c_cartpole` (SB3's defaults, "
                "8 envs, MLP 64x64 tanh), with SB3's class and arguments on both sides.",
    env_id="CartPole-v1",
    n_envs=8,
    total_timesteps=100_000,
    sb3=Side("A2C", dict(
        n_steps=5, learning_rate=7e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.0, vf_coef=0.5,
        max_grad_norm=0.5, rms_prop_eps=1e-5, use_rms_prop=True, normalize_advantage=False,
    )),
    sbtf=Side("A2C", dict(
        n_steps=5, learning_rate=7e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.0, vf_coef=0.5,
        max_grad_norm=0.5, rms_prop_eps=1e-5, use_rms_prop=True, normalize_advantage=False,
    ), module="sbtf.sb3"),
    notes=(
        "Same class name and arguments on both sides; both train with PyTorch's RMSprop maths.",
        "`a2c_cartpole` runs the same work with stable-baselines 2's `sbtf.A2C` (`rms_prop_style='torch'`).",
    ),
))

# --------------------------------------------------------------------------- DQN
_add(Case(
    name="dqn_cartpole",
    description="DQN on CartPole-v1 with SB3's default hyperparameters except `learning_starts=1000`, one env, "
                "MLP 64x64 ReLU Q-network, no double-Q, no dueling, no prioritised replay.",
    env_id="CartPole-v1",
    n_envs=1,
    total_timesteps=50_000,
    sb3=Side("DQN", dict(
        learning_rate=1e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=32, tau=1.0, gamma=0.99,
        train_freq=4, gradient_steps=1, target_update_interval=10_000, exploration_fraction=0.1,
        exploration_initial_eps=1.0, exploration_final_eps=0.05, max_grad_norm=10,
    )),
    sbtf=Side("DQN", dict(
        learning_rate=1e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=32, gamma=0.99,
        train_freq=4, target_network_update_freq=10_000, exploration_fraction=0.1,
        exploration_initial_eps=1.0, exploration_final_eps=0.05, double_q=False,
        prioritized_replay=False, param_noise=False,
        policy_kwargs=dict(layers=[64, 64], dueling=False),
    )),
    notes=(
        "SB2's DQN defaults to double-Q and a dueling head; both are switched off to match SB3's DQN.",
        "SB2's DQN clips gradients at norm 10 internally, which is SB3's `max_grad_norm=10`; "
        "SB3's `tau=1.0` is SB2's hard target update.",
    ),
))

_DQN_SB3_DEFAULTS = dict(
    learning_rate=1e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=32, tau=1.0, gamma=0.99,
    train_freq=4, gradient_steps=1, target_update_interval=10_000, exploration_fraction=0.1,
    exploration_initial_eps=1.0, exploration_final_eps=0.05, max_grad_norm=10,
)
_add(Case(
    name="dqn_sb3_cartpole",
    description="stable-baselines3's DQN as sbtf.sb3.DQN against SB3's: the work of `dqn_cartpole` (SB3's defaults "
                "except `learning_starts=1000`, one env, MLP 64x64 ReLU Q-network), with SB3's class and arguments on "
                "both sides.",
    env_id="CartPole-v1",
    n_envs=1,
    total_timesteps=50_000,
    sb3=Side("DQN", dict(_DQN_SB3_DEFAULTS)),
    sbtf=Side("DQN", dict(_DQN_SB3_DEFAULTS), module="sbtf.sb3"),
    notes=(
        "Same class name, arguments and defaults on both sides (sbtf.sb3 takes SB3's); both train with PyTorch's "
        "Adam maths, PyTorch's default initialisation and `clip_grad_norm_`'s clipping.",
        "`dqn_cartpole` runs the same work with stable-baselines 2's `sbtf.DQN` (double-Q and dueling switched "
        "off): the two sbtf rows compare SB2's class and SB3's on one workload.",
    ),
))

# --------------------------------------------------------------------------- SAC
_add(Case(
    name="sac_pendulum",
    description="SAC on Pendulum-v1 with SB3's default hyperparameters except `learning_starts=1000`, one env, "
                "MLP 256x256 ReLU, automatic entropy coefficient.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=10_000,
    sb3=Side("SAC", dict(
        learning_rate=3e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=256, tau=0.005, gamma=0.99,
        train_freq=1, gradient_steps=1, ent_coef="auto", target_update_interval=1, target_entropy="auto",
    )),
    sbtf=Side("SAC", dict(
        learning_rate=3e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=256, tau=0.005, gamma=0.99,
        train_freq=1, gradient_steps=1, ent_coef="auto", target_update_interval=1, target_entropy="auto",
        policy_kwargs=dict(layers=[256, 256]),
    )),
    notes=(
        "SB2's SAC is the first SAC paper's: twin Q-networks plus a state-value network and its target; "
        "SB3's has twin Q-networks and their targets, no value network. So SB2 trains one more network "
        "per gradient step.",
    ),
))

# --------------------------------------------------------------------------- TD3
_add(Case(
    name="td3_pendulum",
    description="TD3 on Pendulum-v1 with SB3's default hyperparameters and Gaussian action noise (sigma 0.1), "
                "one env, MLP 400x300 ReLU.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=10_000,
    sb3=Side("TD3", dict(
        learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256, tau=0.005, gamma=0.99,
        train_freq=1, gradient_steps=1, policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5,
    ), action_noise=("normal", 0.1)),
    sbtf=Side("TD3", dict(
        learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256, tau=0.005, gamma=0.99,
        train_freq=1, gradient_steps=1, policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5,
        policy_kwargs=dict(layers=[400, 300]),
    ), action_noise=("normal", 0.1)),
    notes=(
        "SB2's TD3 defaults differ a lot from SB3's (train_freq=100, gradient_steps=100, batch 128, 64x64 net); "
        "the sbtf side is given SB3's values.",
    ),
))

_SAC_SB3_DEFAULTS = dict(learning_rate=3e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=256, tau=0.005,
                         gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto", target_update_interval=1,
                         target_entropy="auto")
_add(Case(
    name="sac_sb3_pendulum",
    description="stable-baselines3's SAC as sbtf.sb3.SAC against SB3's: the work of `sac_pendulum` (SB3's defaults "
                "except `learning_starts=1000`, one env, MLP 256x256 ReLU), with SB3's class and arguments on both "
                "sides.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=10_000,
    sb3=Side("SAC", dict(_SAC_SB3_DEFAULTS)),
    sbtf=Side("SAC", dict(_SAC_SB3_DEFAULTS), module="sbtf.sb3"),
    notes=(
        "Same maths on both sides (twin Q-critics and their targets, no value network); `sac_pendulum` runs the "
        "same work with stable-baselines 2's `sbtf.SAC`, which also trains a value network.",
    ),
))

_TD3_SB3_DEFAULTS = dict(learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256, tau=0.005,
                         gamma=0.99, train_freq=1, gradient_steps=1, policy_delay=2, target_policy_noise=0.2,
                         target_noise_clip=0.5)
_add(Case(
    name="td3_sb3_pendulum",
    description="stable-baselines3's TD3 as sbtf.sb3.TD3 against SB3's: the work of `td3_pendulum` (SB3's defaults, "
                "Gaussian action noise sigma 0.1, one env, MLP 400x300 ReLU), with SB3's class and arguments on both "
                "sides.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=10_000,
    sb3=Side("TD3", dict(_TD3_SB3_DEFAULTS), action_noise=("normal", 0.1)),
    sbtf=Side("TD3", dict(_TD3_SB3_DEFAULTS), module="sbtf.sb3", action_noise=("normal", 0.1)),
    notes=("Same class name, arguments and defaults on both sides; `td3_pendulum` runs it with SB2's `sbtf.TD3`.",),
))

# --------------------------------------------------------------------------- DDPG
_add(Case(
    name="ddpg_pendulum",
    description="DDPG on Pendulum-v1 with SB3's default hyperparameters and Gaussian action noise (sigma 0.1), "
                "one env, MLP 400x300 ReLU.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=10_000,
    sb3=Side("DDPG", dict(
        learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256, tau=0.005, gamma=0.99,
        train_freq=1, gradient_steps=1,
    ), action_noise=("normal", 0.1)),
    sbtf=Side("DDPG", dict(
        gamma=0.99, nb_rollout_steps=1, nb_train_steps=1, batch_size=256, tau=0.005, actor_lr=1e-3,
        critic_lr=1e-3, buffer_size=1_000_000, normalize_observations=False, normalize_returns=False,
        observation_range=(-10.0, 10.0), critic_l2_reg=0.0, clip_norm=None, policy_kwargs=dict(layers=[400, 300]),
    ), action_noise=("normal", 0.1)),
    notes=(
        "Cycle mapping: SB3 collects `train_freq=1` step and then does `gradient_steps=1` update; SB2's cycle is "
        "`nb_rollout_steps` steps then `nb_train_steps` updates, so `nb_rollout_steps=1, nb_train_steps=1` is the "
        "same interleaving (one update per environment step, on data up to the current step). A longer cycle "
        "with the same ratio (e.g. 100/100, which sbtf runs as one compiled call) would be faster but would "
        "train on staler data, so it is not used here.",
        "`learning_rate=1e-3` (SB3, both networks) is SB2's `actor_lr=1e-3, critic_lr=1e-3`; `tau`, `gamma`, "
        "`batch_size`, `buffer_size` and the 400x300 ReLU networks are the same on both sides; both use Adam "
        "with epsilon 1e-8 (SB2's MpiAdam in one process).",
        "SB2's DDPG clips the observations the networks see to `observation_range` (default (-5, 5)) even "
        "without normalisation; Pendulum's angular velocity reaches +-8, so the sbtf side passes (-10, 10) (no "
        "clipping, as SB3).",
        "SB2's DDPG has no `learning_starts`: it acts with the noisy policy from the first step and trains "
        "once the buffer holds `batch_size` (256) transitions; SB3 acts uniformly at random for the first "
        "100 steps and trains from then on.",
        "SB2 computes the actor and critic gradients on the same pre-update networks; SB3 updates the critic "
        "first and then the actor against the updated critic.",
        "SB2's DDPG critic feeds the action in after the first hidden layer, SB3's at the input; SB2 starts the "
        "output layers from uniform(-3e-3, 3e-3) weights.",
    ),
))

# --------------------------------------------------------------------------- TRPO
_TRPO_SB3 = dict(
    learning_rate=1e-3, n_steps=2048, batch_size=128, gamma=0.99, cg_max_steps=15, cg_damping=0.1,
    line_search_shrinking_factor=0.8, line_search_max_iter=10, n_critic_updates=10, gae_lambda=0.95,
    normalize_advantage=True, target_kl=0.01, sub_sampling_factor=1,
)
_TRPO_SBTF = dict(
    timesteps_per_batch=2048, gamma=0.99, max_kl=0.01, cg_iters=15, cg_damping=0.1, lam=0.95, entcoeff=0.0,
    vf_stepsize=1e-3, vf_iters=10,
)
_TRPO_NOTES = (
    "SB2's TRPO always uses value-function minibatches of 128 (sb3-contrib `batch_size=128`), halves the "
    "step in its line search up to 10 times (sb3-contrib shrinks by 0.8, up to 10 times), accepts a step with "
    "KL up to 1.5 * `max_kl`, and computes Fisher-vector products on every 5th sample "
    "(sb3-contrib `sub_sampling_factor=1`: on all samples). None of these is a parameter in SB2.",
    "SB2's TRPO is written for MPI; one process (no `mpirun`) is used here.",
)
_add(Case(
    name="trpo_cartpole",
    description="TRPO on CartPole-v1 with sb3-contrib's default hyperparameters, one env, "
                "MLP 64x64 tanh with separate policy and value networks.",
    env_id="CartPole-v1",
    n_envs=1,
    total_timesteps=50_000,
    sb3=Side("TRPO", dict(_TRPO_SB3), module="sb3_contrib"),
    sbtf=Side("TRPO", dict(_TRPO_SBTF)),
    notes=_TRPO_NOTES,
))
_add(Case(
    name="trpo_pendulum",
    description="TRPO on Pendulum-v1 with sb3-contrib's default hyperparameters, one env, "
                "MLP 64x64 tanh with separate policy and value networks, state-independent log-std.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=50_000,
    sb3=Side("TRPO", dict(_TRPO_SB3), module="sb3_contrib"),
    sbtf=Side("TRPO", dict(_TRPO_SBTF)),
    notes=_TRPO_NOTES,
))


# --------------------------------------------------------------------------- sb3-contrib: QR-DQN, TQC
_QRDQN_ZOO_CARTPOLE = dict(
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256], n_quantiles=10),
)
_add(Case(
    name="qrdqn_cartpole",
    description="QR-DQN on CartPole-v1 with the rl-baselines3-zoo hyperparameters (MLP 256x256 ReLU, 10 quantiles, "
                "128 gradient steps every 256 env steps), one env.",
    env_id="CartPole-v1",
    n_envs=1,
    total_timesteps=50_000,
    sb3=Side("QRDQN", dict(_QRDQN_ZOO_CARTPOLE), module="sb3_contrib"),
    sbtf=Side("QRDQN", dict(_QRDQN_ZOO_CARTPOLE), module="sbtf.contrib"),
    notes=(
        "Same class name, arguments and defaults on both sides (sbtf.contrib takes sb3-contrib's); both train with "
        "PyTorch's Adam maths (eps = 0.01 / batch_size, the QR-DQN paper's) and PyTorch's default initialisation.",
        "sb3-contrib's loop can overshoot `total_timesteps` by up to `train_freq - 1` steps (it finishes the "
        "rollout); sbtf stops at `total_timesteps`. steps/s is computed from each model's `num_timesteps`.",
    ),
))

_TQC_ZOO_PENDULUM = dict(learning_rate=1e-3, train_freq=64, gradient_steps=64,
                         policy_kwargs=dict(net_arch=[64, 64]))
_add(Case(
    name="tqc_pendulum",
    description="TQC on Pendulum-v1 with the rl-baselines3-zoo hyperparameters without gSDE (MLP 64x64 ReLU, "
                "2 critics x 25 quantiles, 2 dropped per critic, 64 gradient steps every 64 env steps, "
                "automatic entropy coefficient), one env.",
    env_id="Pendulum-v1",
    n_envs=1,
    total_timesteps=10_000,
    sb3=Side("TQC", dict(_TQC_ZOO_PENDULUM), module="sb3_contrib"),
    sbtf=Side("TQC", dict(_TQC_ZOO_PENDULUM), module="sbtf.contrib"),
    notes=(
        "The zoo's Pendulum entry also sets `use_sde=True, log_std_init=-2`; sbtf has no gSDE yet, so both sides "
        "run without it (Gaussian exploration of the squashed policy, as sb3-contrib's default).",
        "Same class name, arguments and defaults on both sides (sbtf.contrib takes sb3-contrib's).",
    ),
))

# ---------------------------------------------------------------------------------------------------------------
# sb3-contrib algorithms (sbtf.contrib) against sb3-contrib 2.9.2, same constructor arguments on both sides
_add(Case(
    name="ppo_mask_invalid_actions",
    description="MaskablePPO on the invalid-action identity env (Discrete(20), 10 actions invalid at each step), one "
                "env, sb3-contrib's defaults but n_steps=512; MLP 64x64 tanh, separate policy and value networks.",
    env_id="InvalidActionEnvDiscrete",
    env_kwargs=dict(dim=20, n_invalid_actions=10),
    masked=True,
    n_envs=1,
    total_timesteps=20_480,
    sb3=Side("MaskablePPO", dict(n_steps=512), module="sb3_contrib",
             env_entry="sb3_contrib.common.envs:InvalidActionEnvDiscrete"),
    sbtf=Side("MaskablePPO", dict(n_steps=512), module="sbtf.contrib",
              env_entry="sbtf.contrib.common.maskable.envs:InvalidActionEnvDiscrete"),
    notes=("Each side uses its own InvalidActionEnvDiscrete (same maths; sb3-contrib's draws the invalid actions "
           "with NumPy's global generator, sbtf's with the env's seeded one).",
           "The evaluation passes the env's action masks to predict on both sides."),
))
_add(Case(
    name="ars_pendulum",
    description="ARS on Pendulum-v1 with the rl-baselines3-zoo hyperparameters (MlpPolicy net_arch=[16], "
                "learning_rate=0.018, n_delta=4, n_top=1, delta_std=0.1, observations normalised online), one env; "
                "100k of the zoo's 5M steps.",
    env_id="Pendulum-v1",
    normalize=dict(norm_obs=True, norm_reward=False),
    n_envs=1,
    total_timesteps=100_000,
    sb3=Side("ARS", dict(learning_rate=0.018, n_delta=4, n_top=1, delta_std=0.1,
                         policy_kwargs=dict(net_arch=[16])), module="sb3_contrib"),
    sbtf=Side("ARS", dict(learning_rate=0.018, n_delta=4, n_top=1, delta_std=0.1,
                          policy_kwargs=dict(net_arch=[16])), module="sbtf.contrib"),
    notes=("Both sides evaluate the candidates one after the other on the one env (sb3-contrib without AsyncEval; "
           "sbtf with n_envs=1). sbtf spreads candidates over the envs of a VecEnv when it has several.",),
))
_add(Case(
    name="trpo_contrib_pendulum",
    description="TRPO with sb3-contrib's arguments on Pendulum-v1, the rl-baselines3-zoo hyperparameters without "
                "gSDE (n_envs=2, n_steps=1024, gamma=0.9, n_critic_updates=15), MLP 64x64 tanh.",
    env_id="Pendulum-v1",
    n_envs=2,
    total_timesteps=100_000,
    sb3=Side("TRPO", dict(n_steps=1024, gamma=0.9, n_critic_updates=15), module="sb3_contrib"),
    sbtf=Side("TRPO", dict(n_steps=1024, gamma=0.9, n_critic_updates=15), module="sbtf.contrib"),
    notes=("The zoo's entry uses gSDE (use_sde=True, sde_sample_freq=4); sbtf's TRPO has no gSDE, so both sides "
           "run without it.",),
))

_PPO_LSTM_ZOO_NOVEL = dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                          learning_rate=1e-3, clip_range=0.2,
                          policy_kwargs=dict(lstm_hidden_size=64, enable_critic_lstm=True,
                                             net_arch=dict(pi=[64], vf=[64]), activation_fn="relu", ortho_init=False))
_add(Case(
    name="ppo_lstm_cartpole_novel",
    description="RecurrentPPO on CartPole-v1 with the velocities hidden (rl-baselines3-zoo's CartPoleNoVel-v1), the "
                "zoo's ppo_lstm hyperparameters: 8 envs, n_steps 32, 20 epochs of one 256-sample minibatch, "
                "separate 64-unit LSTMs for actor and critic, then 64 ReLU units each, no orthogonal init.",
    env_id="CartPoleNoVel-v1",
    n_envs=8,
    total_timesteps=100_000,
    recurrent=True,
    sb3=Side("RecurrentPPO", dict(_PPO_LSTM_ZOO_NOVEL), policy="MlpLstmPolicy", module="sb3_contrib",
             env_entry="bench_envs:NoVelocityCartPole"),
    sbtf=Side("RecurrentPPO", dict(_PPO_LSTM_ZOO_NOVEL), policy="MlpLstmPolicy", module="sbtf.contrib",
              env_entry="bench_envs:NoVelocityCartPole"),
    notes=("Both sides use the same wrapper (`benchmarks/bench_envs.py`: CartPole-v1 observing only the cart position "
           "and the pole angle).",
           "The zoo's schedules (`lin_0.001`, `lin_0.2`) are constants here on both sides.",
           "`ortho_init=False`: each library's default initialisation of its layers (PyTorch's and Keras' differ).",
           "The evaluation carries the LSTM state through each episode on both sides "
           "(`predict(obs, state=state, episode_start=...)`)."),
))

# --------------------------------------------------------------------------- CNN policies on Atari (issue #18)
_ATARI_NOTES = (
    "Both sides build their envs with their own `make_atari_env` (NoFrameskip-v4, DeepMind wrappers: no-op reset, "
    "frame skip 4 with max-pooling, episodic life, fire reset, 84x84 grey frames, reward clipping) and stack 4 "
    "frames with `VecFrameStack`; both feed uint8 frames and scale them by 1/255 inside the network.",
    "rl-zoo's schedules (`lin_2.5e-4`, `lin_0.1`) are constants here on both sides; the speed does not depend on "
    "them. Speed only: 25k steps of Pong teach neither side anything, so there is no evaluation.",
    "Warm-up = everything up to the end of the first update (tracing and compilation in sbtf, the first "
    "rollout on both sides; DQN: `learning_starts`); *steps/s after it* is the steady rate.",
)
_add(Case(
    name="ppo_pong_cnn",
    description="PPO with the Nature CNN (`CnnPolicy`) on PongNoFrameskip-v4, 8 envs, rl-zoo's Atari "
                "hyperparameters (n_steps 128, 4 epochs of 4 minibatches of 256).",
    env_id="PongNoFrameskip-v4",
    n_envs=8,
    total_timesteps=24_576,
    atari=True,
    eval_episodes=0,
    sb3=Side("PPO", dict(n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4, clip_range=0.1,
                         ent_coef=0.01, vf_coef=0.5, gamma=0.99, gae_lambda=0.95, max_grad_norm=0.5),
             policy="CnnPolicy"),
    sbtf=Side("PPO2", dict(n_steps=128, nminibatches=4, noptepochs=4, learning_rate=2.5e-4, cliprange=0.1,
                           cliprange_vf=-1, ent_coef=0.01, vf_coef=0.5, gamma=0.99, lam=0.95, max_grad_norm=0.5),
              policy="CnnPolicy"),
    notes=("Minibatch: SB3 `batch_size=256` = SB2 `n_steps * n_envs / nminibatches` = 128 * 8 / 4.",
           _VF_CLIP_NOTE) + _ATARI_NOTES,
))
_add(Case(
    name="a2c_pong_cnn",
    description="A2C with the Nature CNN (`CnnPolicy`) on PongNoFrameskip-v4, 8 envs, rl-zoo's Atari "
                "hyperparameters (n_steps 5, ent_coef 0.01, vf_coef 0.25, RMSprop with TF's epsilon placement).",
    env_id="PongNoFrameskip-v4",
    n_envs=8,
    total_timesteps=24_000,
    atari=True,
    eval_episodes=0,
    sb3=Side("A2C", dict(n_steps=5, learning_rate=7e-4, ent_coef=0.01, vf_coef=0.25, gamma=0.99, gae_lambda=1.0,
                         max_grad_norm=0.5, normalize_advantage=False,
                         policy_kwargs=dict(optimizer_class="RMSpropTFLike", optimizer_kwargs=dict(eps=1e-5))),
             policy="CnnPolicy"),
    sbtf=Side("A2C", dict(n_steps=5, learning_rate=7e-4, ent_coef=0.01, vf_coef=0.25, gamma=0.99,
                          max_grad_norm=0.5, alpha=0.99, epsilon=1e-5, lr_schedule="constant"),
              policy="CnnPolicy"),
    notes=("rl-zoo runs A2C on Atari with SB3's `RMSpropTFLike` (TF1's RMSprop, as SB2), which is sbtf's default "
           "optimizer: both sides run TF1's RMSprop maths.",) + _ATARI_NOTES,
))
_add(Case(
    name="dqn_pong_cnn",
    description="DQN with the Nature CNN (`CnnPolicy`) on PongNoFrameskip-v4, one env, rl-zoo's Atari "
                "hyperparameters except a 10k replay buffer and `learning_starts=1000`.",
    env_id="PongNoFrameskip-v4",
    n_envs=1,
    total_timesteps=25_000,
    atari=True,
    eval_episodes=0,
    sb3=Side("DQN", dict(buffer_size=10_000, learning_starts=1000, learning_rate=1e-4, batch_size=32, gamma=0.99,
                         train_freq=4, gradient_steps=1, target_update_interval=1000, exploration_fraction=0.1,
                         exploration_final_eps=0.01, optimize_memory_usage=False, tau=1.0, max_grad_norm=10),
             policy="CnnPolicy"),
    sbtf=Side("DQN", dict(buffer_size=10_000, learning_starts=1000, learning_rate=1e-4, batch_size=32, gamma=0.99,
                          train_freq=4, target_network_update_freq=1000, exploration_fraction=0.1,
                          exploration_final_eps=0.01, double_q=False, prioritized_replay=False,
                          policy_kwargs=dict(dueling=False)),
              policy="CnnPolicy"),
    notes=("SB2's DQN defaults to double-Q and a dueling head; both are off, as in SB3's DQN. SB2 clips gradients at "
           "norm 10, SB3 `max_grad_norm=10`.",) + _ATARI_NOTES,
))

# --------------------------------------------------------------------------- large networks (issue #18)
_add(Case(
    name="ppo_bipedalwalker_256",
    description="PPO on BipedalWalker-v3, 16 envs, separate 256x256 tanh policy and value networks "
                "(rl-zoo's n_steps 2048 per env would make one update per 32k steps; n_steps 256 is used).",
    env_id="BipedalWalker-v3",
    n_envs=16,
    total_timesteps=32_768,
    eval_episodes=2,
    sb3=Side("PPO", dict(n_steps=256, batch_size=1024, n_epochs=10, learning_rate=3e-4, gamma=0.99,
                         gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
                         policy_kwargs=dict(net_arch=dict(pi=[256, 256], vf=[256, 256]))), ),
    sbtf=Side("PPO2", dict(n_steps=256, nminibatches=4, noptepochs=10, learning_rate=3e-4, gamma=0.99, lam=0.95,
                           cliprange=0.2, cliprange_vf=-1, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
                           policy_kwargs=dict(net_arch=[dict(pi=[256, 256], vf=[256, 256])]))),
    notes=("Minibatch: SB3 `batch_size=1024` = SB2 `n_steps * n_envs / nminibatches` = 256 * 16 / 4.",
           _VF_CLIP_NOTE, _PPO_TIMESTEPS_NOTE),
))
_add(Case(
    name="sac_lunarlander_256",
    description="SAC on LunarLanderContinuous-v3, one env, 256x256 ReLU, SB3's defaults except "
                "`learning_starts=1000`.",
    env_id="LunarLanderContinuous-v3",
    n_envs=1,
    total_timesteps=10_000,
    eval_episodes=2,
    sb3=Side("SAC", dict(learning_rate=3e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=256, tau=0.005,
                         gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto")),
    sbtf=Side("SAC", dict(learning_rate=3e-4, buffer_size=1_000_000, learning_starts=1000, batch_size=256, tau=0.005,
                          gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto",
                          policy_kwargs=dict(net_arch=[256, 256], n_critics=2))),
    notes=("Both sides: actor 256x256 and two Q critics of 256x256 (SB3's `net_arch=[256, 256]`, `n_critics=2`, "
           "SB3's defaults for SAC written out on the sbtf side).",
           "SB2's SAC trains a state-value network (256x256) besides the twin Q-networks (one more network per "
           "step); SB3 has no value network, it bootstraps from the target Q-networks; see `sac_pendulum`."),
))

# --------------------------------------------------------------------------- Dict observations (issue #14)
_add(Case(
    name="ppo_multiinput_simplemultiobs",
    description="PPO `MultiInputPolicy` on SimpleMultiObsEnv (4x4 grid world, Dict of a 5-float vector and a 64x64x1 "
                "uint8 image, fixed start), 8 envs, n_steps 128, SB3's PPO defaults; each library's own copy of "
                "the env (the same MDP).",
    env_id="SimpleMultiObsEnv",
    n_envs=8,
    total_timesteps=50_176,
    eval_episodes=2,
    env_kwargs=dict(random_start=False),
    sb3=Side("PPO", dict(n_steps=128, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95,
                         clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5),
             policy="MultiInputPolicy", env_entry="stable_baselines3.common.envs:SimpleMultiObsEnv"),
    sbtf=Side("PPO2", dict(n_steps=128, nminibatches=16, noptepochs=10, learning_rate=3e-4, gamma=0.99, lam=0.95,
                           cliprange=0.2, cliprange_vf=-1, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5),
              policy="MultiInputPolicy", env_entry="sbtf.common.multi_input_envs:SimpleMultiObsEnv"),
    notes=("Minibatch: SB3 `batch_size=64` = SB2 `n_steps * n_envs / nminibatches` = 128 * 8 / 16.",
           "Same network on both sides: `CombinedExtractor` (NatureCNN to 256 features for the image, the vector "
           "flattened), then separate pi and vf layers of [64, 64] sharing the extractor (376,421 parameters in SB3; "
           "sbtf has 260 more: SB2's unused Q-value head `q`, never trained by PPO2).",
           "The env draws its column vectors and row images from NumPy's global generator when created: each of "
           "the 8 training envs and the evaluation env have their own random images, so the evaluation reward "
           "measures generalisation to unseen images, not the training task.",
           _VF_CLIP_NOTE, _PPO_TIMESTEPS_NOTE),
))

# --------------------------------------------------------------------------- many envs (issue #18)
for _vec in ("dummy", "subproc"):
    for _n in (1, 8, 32, 128):
        _add(Case(
            name=f"ppo_cartpole_{_vec}_{_n}",
            description=f"Scaling: PPO on CartPole-v1 with the rl-zoo hyperparameters (n_steps 32, 20 epochs, one "
                        f"minibatch of the whole rollout), {_n} env{'s' if _n > 1 else ''} in a "
                        f"{'SubprocVecEnv' if _vec == 'subproc' else 'DummyVecEnv'}.",
            env_id="CartPole-v1",
            n_envs=_n,
            total_timesteps=max(20_480, 32 * _n * 8),
            vec_env=_vec,
            eval_episodes=2,
            sb3=Side("PPO", dict(n_steps=32, batch_size=32 * _n, n_epochs=20, gae_lambda=0.8, gamma=0.98,
                                 learning_rate=1e-3, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5)),
            sbtf=Side("PPO2", dict(n_steps=32, nminibatches=1, noptepochs=20, lam=0.8, gamma=0.98,
                                   learning_rate=1e-3, cliprange=0.2, cliprange_vf=-1, ent_coef=0.0, vf_coef=0.5,
                                   max_grad_norm=0.5)),
            notes=(_VF_CLIP_NOTE, _PPO_TIMESTEPS_NOTE),
        ))
