"""
Weights tracked by construction (sbtf.common.compile.weight_tracking): nobody declares which weights a train step
writes, and every tracked write refreshes acting.

* the traced graph tells which variables a step writes (through while loops, conds, fused optimizer kernels), and
  which it only reads;
* a train step declaring nothing keeps NumPy acting equal to TF acting, returns the fresh copies with its outputs
  (no second read), and leaves the copies stale when interrupted right after its compiled call;
* load_parameters, set_weights, assign_variables, SetFromFlat / make_assign_fn, MpiAdam, TRPO's line search are
  tracked writes;
* an algorithm written on the core without declaring anything (a small REINFORCE) acts with its trained weights
  after learn().
"""
from __future__ import annotations

from typing import Dict

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf.common.compile import fast_call, weight_tracking
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.policies import MlpPolicy
from sbtf.common.compile.weight_tracking import (WeightVersion, assign_variables, track_writes, variables_changed,
                                         variables_written_by)

BOX4 = gym.spaces.Box(-1, 1, (4,), np.float32)


def _policy(seed: int = 0) -> MlpPolicy:
    tf.random.set_seed(seed)
    return MlpPolicy(None, BOX4, gym.spaces.Discrete(3), layers=[8])


def _obs(n: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)


def _tf_values(policy, obs):
    flat, value = policy(tf.constant(obs))
    return flat.numpy(), value.numpy()


def _same_handles(found, expected) -> bool:
    ids = {id(getattr(v, "handle", v)) for v in found}
    return ids == {id(v.handle) for v in expected}


# ------------------------------------------------------------------ the graph analysis
def test_written_variables_found_through_loops_conds_and_fused_kernels():
    written_in_cond = tf.Variable(tf.zeros(3))
    read_in_cond = tf.Variable(1.0)
    only_read = tf.Variable(2.0)
    applied = tf.Variable(tf.zeros(3))

    def fn(x):
        def body(i, acc):
            def then():
                written_in_cond.assign_add(tf.fill([3], x))
                return tf.constant(1.0)

            return i + 1, acc + tf.cond(x > 0, then, lambda: read_in_cond.read_value())

        _, total = tf.while_loop(lambda i, _: i < 3, body, (0, 0.0))
        tf.raw_ops.ResourceApplyGradientDescent(var=applied.handle, alpha=0.1, delta=tf.ones(3))
        return total + only_read

    concrete = tf.function(fn, autograph=False).get_concrete_function(tf.TensorSpec((), tf.float32))
    written = variables_written_by(concrete.graph)
    assert _same_handles(written, [written_in_cond, applied])


def test_a_step_that_only_reads_writes_nothing():
    policy = _policy()
    step = TrainStep(lambda obs: {"v": policy(obs)[1]}, {"obs": policy.obs_signature(6)})
    step(obs=_obs())
    assert step.written == []


# ------------------------------------------------------------------ train steps declare nothing
def _sgd_step(policy, n_obs: int = 6, loop: int = 2) -> TrainStep:
    """A train step that declares nothing: ``loop`` SGD steps on the value, inside a tf.while_loop."""
    variables = policy.trainable_variables

    def fn(obs, target, lr):
        def body(i):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(policy(obs)[1] - target))
            for var, grad in zip(variables, tape.gradient(loss, variables)):
                if grad is not None:
                    var.assign_sub(lr * grad)
            return (i + 1,)

        tf.while_loop(lambda i: i < loop, body, (tf.constant(0),))
        return {"loss": tf.reduce_mean(tf.square(policy(obs)[1] - target))}

    return TrainStep(fn, {"obs": policy.obs_signature(n_obs), "target": tf.TensorSpec((n_obs,), tf.float32),
                          "lr": tf.TensorSpec((), tf.float32)})


def test_undeclared_step_refreshes_numpy_acting_without_a_second_read():
    policy = _policy()
    obs = _obs()
    before = policy.value(obs).copy()
    reads = policy.n_weight_reads
    step = _sgd_step(policy)
    for _ in range(3):
        step(obs=obs, target=np.ones(6, np.float32), lr=0.1)
        flat, value = _tf_values(policy, obs)
        np.testing.assert_allclose(policy.value(obs), value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(policy.flat_params(obs), flat, rtol=1e-5, atol=1e-6)
    assert not np.allclose(policy.value(obs), before)
    assert policy.n_weight_reads == reads  # the fresh copies rode along with the step's outputs
    assert _same_handles(step.written, _with_value_gradient(policy, obs))  # what the loop writes, nothing else
    assert step.n_traces == 1


def _with_value_gradient(policy, obs) -> list:
    variables = policy.trainable_variables
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(policy(tf.constant(obs))[1])
    return [v for v, g in zip(variables, tape.gradient(loss, variables)) if g is not None]


def test_step_traced_before_the_policy_first_acts():
    policy = _policy(1)
    obs = _obs(seed=1)
    step = _sgd_step(policy)
    step(obs=obs, target=np.zeros(6, np.float32), lr=0.05)  # the acting path has not decided NumPy/TF yet
    assert policy.acts_in_numpy
    np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)


def test_interrupted_step_leaves_the_copies_stale(monkeypatch):
    policy = _policy(2)
    obs = _obs(seed=2)
    step = _sgd_step(policy)
    step(obs=obs, target=np.ones(6, np.float32), lr=0.1)
    policy.value(obs)
    function = step._functions[step.jit_compile]

    def interrupted(*args):
        function(*args)  # the variables moved; a Ctrl-C arrives as the call returns
        raise KeyboardInterrupt

    monkeypatch.setitem(step._functions, step.jit_compile, interrupted)
    with pytest.raises(KeyboardInterrupt):
        step(obs=obs, target=np.ones(6, np.float32), lr=0.1)
    np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)


def test_two_policies_in_one_step_and_a_policy_it_only_reads():
    written, read = _policy(3), _policy(4)
    obs = _obs(seed=3)
    written.value(obs), read.value(obs)
    read_version = read._weight_version.value

    def fn(obs):
        target = read(obs)[1]
        for var in written.trainable_variables:
            var.assign(var * 0.9)
        return {"t": tf.reduce_mean(target)}

    step = TrainStep(fn, {"obs": written.obs_signature(6)})
    step(obs=obs)
    np.testing.assert_allclose(written.value(obs), _tf_values(written, obs)[1], rtol=1e-5, atol=1e-6)
    assert read._weight_version.value == read_version  # only read: its copies stay current


# ------------------------------------------------------------------ other tracked writes
def test_assign_variables_set_weights_and_load_parameters_are_tracked():
    from sbtf import A2C

    model = A2C("MlpPolicy", "CartPole-v1", seed=0)
    policy = model.policy_tf
    obs = _obs()
    initial = policy.value(obs).copy()
    assign_variables([(var, var * 1.5) for var in policy.trainable_variables])
    np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)
    policy.set_weights([w * 0.5 for w in policy.get_weights()])
    np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)
    model.load_parameters({name: value + 0.01 for name, value in model.get_parameters().items()})
    np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(policy.value(obs), initial)


def test_set_from_flat_assign_fn_and_mpi_adam_are_tracked():
    from sbtf.common.mpi_adam import MpiAdam
    from sbtf.common.tf_util import SetFromFlat, assign_from_flat, make_assign_fn

    policy, other = _policy(5), _policy(6)
    obs = _obs(seed=5)
    variables = policy.parameter_list()
    size = sum(int(np.prod(v.shape)) for v in variables)
    for write in (lambda: SetFromFlat(variables)(np.full(size, 0.01, np.float32)),
                  lambda: assign_from_flat(variables, tf.fill([size], -0.02)),
                  lambda: make_assign_fn(variables, other.parameter_list())(),
                  lambda: MpiAdam(variables).update(np.ones(size, np.float32), 0.01)):
        policy.value(obs)
        write()
        np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)


def test_tracked_function_and_registry_generation():
    policy = _policy(7)
    obs = _obs(seed=7)
    policy.value(obs)
    scale = track_writes(tf.function(lambda: [v.assign(v * 2.0) for v in policy.trainable_variables][-1],
                                     input_signature=[], autograph=False))
    version = policy._weight_version.value
    scale()
    assert policy._weight_version.value == version + 1
    np.testing.assert_allclose(policy.value(obs), _tf_values(policy, obs)[1], rtol=1e-5, atol=1e-6)
    generation = weight_tracking.generation()
    _policy(8).value(obs)  # a new mirror registers: the generation moves, tracked functions look again
    assert weight_tracking.generation() != generation
    variables_changed(policy.trainable_variables[:1])
    assert policy._weight_version.value == version + 2


def test_weight_version_is_plain_and_weakly_registered():
    import gc
    import weakref

    version = WeightVersion()
    assert version.bump() == 1 and version.value == 1
    policy = _policy(9)
    policy.value(_obs())
    path = weakref.ref(policy._acting)
    del policy
    gc.collect()
    assert path() is None  # the registry does not keep policies alive


# ------------------------------------------------------------------ an algorithm that declares nothing
def _reinforce_class():
    from sbtf.a2c.a2c import A2CRunner
    from sbtf.common.base_class import SetVerbosity
    from sbtf.common.algo.on_policy import NStepActorCriticRLModel
    from sbtf.common.optimizers import Adam
    from sbtf.common.fileio import model_schema as ms

    class Reinforce(NStepActorCriticRLModel):
        """REINFORCE with a learned baseline, written on the core: no ``updates=``, no weights_changed()."""

        _save_schema = dict(gamma=ms.Real(), n_steps=ms.Integer(1), learning_rate=ms.Real())

        def __init__(self, policy, env, gamma=0.99, n_steps=32, learning_rate=3e-3, seed=None, verbose=0,
                     _init_setup_model=True, policy_kwargs=None):
            self.gamma, self.learning_rate = gamma, learning_rate
            super().__init__(policy, env, n_steps=n_steps, verbose=verbose, _init_setup_model=_init_setup_model,
                             policy_kwargs=policy_kwargs, seed=seed)

        def _make_runner(self):
            return A2CRunner(self.env, self, n_steps=self.n_steps, gamma=self.gamma)

        def setup_model(self):
            with SetVerbosity(self.verbose):
                self.n_batch = self.n_envs * self.n_steps
                self._setup_policy(self.n_steps, self.n_batch)
                self.optimizer = Adam(self._variables)
                self._train_step = self._make_train_step()

        def _make_train_step(self) -> TrainStep:
            inputs = self._rollout_inputs(self.n_batch, ("returns", "values", "masks"), n_states=1)

            def step(obs, actions, returns, values, masks, states):
                with tf.GradientTape() as tape:
                    dist, vpred = self._rollout_distribution(obs, states, masks)
                    loss = tf.reduce_mean((returns - values) * dist.neglogp(actions)) \
                        + 0.5 * tf.reduce_mean(tf.square(vpred - returns))
                self.optimizer.apply(tape.gradient(loss, self._variables), self.learning_rate)
                return {"loss": loss}

            return TrainStep(step, inputs, name="reinforce_train")  # declares nothing

        def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="Reinforce",
                  reset_num_timesteps=True, progress_bar=False):
            return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps,
                               progress_bar)

        def train(self, batch) -> Dict[str, float]:
            out = self._train_step(obs=batch.observations, actions=batch.actions, returns=batch.returns,
                                   values=batch.values, masks=batch.masks, states=self._state_input(batch.states))
            return {name: float(value) for name, value in out.items()}

    return Reinforce


def test_an_algorithm_that_declares_nothing_acts_with_its_trained_weights():
    model = _reinforce_class()("MlpPolicy", "CartPole-v1", seed=0, policy_kwargs=dict(layers=[16]))
    policy = model.policy_tf
    obs = _obs(8, seed=11)
    initial_probs = model.action_probability(obs)
    initial_flat = policy.flat_params(obs).copy()
    initial_weights = [v.numpy().copy() for v in policy.trainable_variables]
    model.learn(1024)
    assert policy.acts_in_numpy
    flat_np, value_np = policy.flat_params(obs), policy.value(obs)
    flat_tf, value_tf = _tf_values(policy, obs)
    np.testing.assert_allclose(flat_np, flat_tf, rtol=1e-5, atol=1e-6)  # NumPy acting == TF: trained weights
    np.testing.assert_allclose(value_np, value_tf, rtol=1e-5, atol=1e-6)
    assert np.max(np.abs(flat_np - initial_flat)) > 1e-3  # and they moved
    assert not np.allclose(model.action_probability(obs), initial_probs, atol=1e-4)
    # every variable that moved is one the step found it writes (from its graph: nothing was declared)
    written = {id(getattr(v, "handle", v)) for v in model._train_step.written}
    moved = [v for v, start in zip(policy.trainable_variables, initial_weights) if not np.array_equal(v.numpy(), start)]
    assert moved and all(id(v.handle) in written for v in moved)


def test_nothing_to_declare():
    policy = _policy(10)
    # the former ``updates=`` declaration is gone: the graph says what is written
    with pytest.raises(TypeError, match="updates"):
        TrainStep(lambda x: {"y": x}, {"x": tf.TensorSpec((), tf.float32)}, updates=(policy,))
    step = TrainStep(lambda x: {"y": x}, {"x": tf.TensorSpec((), tf.float32)}, networks=(policy,), jit_compile=True)
    assert float(step(x=1.0)["y"]) == 1.0 and step.written == []
    assert fast_call.xla_pays_off([policy]) is step.xla_allowed


def test_no_hand_calls_bump_a_weight_version():
    """Structural: outside the core's own weight-changing paths nobody calls ``weights_changed()``, bumps a version
    by hand, or declares what a train step writes."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # the core's weight-changing paths (and the public ``weights_changed`` methods, for users' raw assigns)
    allowed = {("sbtf", "common", "policies.py"), ("sbtf", "common", "compile", "weight_tracking.py"),
               ("sbtf", "common", "compile", "fast_call.py")}
    offenders = []
    for folder in ("sbtf", "converters"):
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            public = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "weights_changed"
                      for n in ast.walk(f)}
            for node in ast.walk(tree):
                if id(node) in public:
                    continue
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr in ("weights_changed", "bump") and tuple(rel.parts) not in allowed:
                        offenders.append(f"{rel}:{node.lineno} .{node.func.attr}()")
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                        "TrainStep", "_k_step_train_step"):
                    offenders += [f"{rel}:{node.lineno} updates=" for kw in node.keywords if kw.arg == "updates"]
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute) \
                        and node.target.attr == "value" and "version" in ast.unparse(node.target.value):
                    offenders.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert offenders == []
