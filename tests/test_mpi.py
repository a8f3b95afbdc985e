"""MPI helpers in one process (with and without mpi4py) and ``mpirun -np 2`` runs of PPO1, TRPO and GAIL."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from sbtf.common import mpi_util
from sbtf.common.mpi_moments import mpi_mean, mpi_moments
from sbtf.common.mpi_util import (SingleProcessComm, abort_on_exception, allgather, allreduce_mean, allreduce_sum,
                                  broadcast_array, get_comm, sync_check)

REPO_ROOT = Path(__file__).resolve().parents[1]
MPIRUN = Path(sys.executable).parent / "mpirun"
# Quiet TensorFlow in the child processes.
CHILD_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO_ROOT) + os.pathsep
             + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}


def _mpi_available() -> str:
    """Why the mpirun tests cannot run here ('' when they can)."""
    try:
        import mpi4py  # noqa: F401  pylint: disable=import-outside-toplevel
    except ImportError:
        return "mpi4py is not installed (install the `mpi` extra: pip install 'sbtf[mpi]')"
    if not MPIRUN.exists():
        return f"no mpirun next to {sys.executable} (install the `mpi` extra, whose mpich wheel provides it)"
    return ""


requires_mpirun = pytest.mark.skipif(bool(_mpi_available()), reason=_mpi_available() or "mpirun available")


def _run_python(code: str, timeout: float = 240, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env or CHILD_ENV, cwd=str(REPO_ROOT))


def _mpirun(script: Path, *args: str, n: int = 2, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(MPIRUN), "-np", str(n), sys.executable, str(script), *args], capture_output=True,
                          text=True, timeout=timeout, env=CHILD_ENV, cwd=str(script.parent))


# ------------------------------------------------------------------------------------------ one process
def test_collectives_in_one_process():
    comm = get_comm()
    assert comm.Get_size() == 1 and comm.Get_rank() == 0
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(allreduce_sum(arr), arr)
    np.testing.assert_array_equal(allreduce_mean(arr), arr)
    assert allgather({"a": 1}) == [{"a": 1}]
    buf = np.ones(3)
    assert broadcast_array(buf) is buf
    sync_check(np.random.randn(5))  # nothing to compare against: must not raise
    tensor = object()
    assert mpi_util.allreduce_tf(tensor) is tensor  # one process: no op is added to the graph
    assert mpi_util.any_rank(True) and not mpi_util.any_rank(False)
    np.testing.assert_array_equal(allreduce_sum(arr, polite=True), arr)
    with pytest.raises(ValueError, match="boom"):
        with abort_on_exception():  # one process: the exception propagates (no abort)
            raise ValueError("boom")


def test_single_process_comm_stand_in():
    comm = SingleProcessComm()
    send, recv = np.arange(4.0), np.zeros(4)
    comm.Allreduce(send, recv, op=mpi_util.SUM)
    np.testing.assert_array_equal(recv, send)
    assert comm.allreduce(3) == 3 and comm.bcast("x") == "x" and comm.allgather(1) == [1]
    with pytest.raises(ValueError):
        comm.Bcast(recv, root=1)


@pytest.mark.parametrize("axis", [0, 1])
def test_mpi_moments_match_numpy(axis):
    data = np.random.default_rng(0).normal(size=(7, 5))
    mean, std, count = mpi_moments(data, axis=axis)
    np.testing.assert_allclose(mean, data.mean(axis=axis))
    np.testing.assert_allclose(std, data.std(axis=axis))
    assert count == data.shape[axis]
    mean2, count2 = mpi_mean(data, axis=axis, keepdims=True)
    np.testing.assert_allclose(mean2, data.mean(axis=axis, keepdims=True))
    assert count2 == count


def test_mpi_running_mean_std_matches_numpy():
    from sbtf.common.mpi_running_mean_std import RunningMeanStd

    rng = np.random.default_rng(1)
    batches = [rng.normal(loc=3.0, scale=2.0, size=(n, 2)) for n in (5, 11, 40)]
    rms = RunningMeanStd(epsilon=0.0, shape=(2,))
    for batch in batches:
        rms.update(batch)
    data = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(rms.std.numpy(), data.std(axis=0), rtol=1e-4)
    np.testing.assert_allclose(rms.mean_np(), rms.mean.numpy())
    np.testing.assert_allclose(rms.std_np(), rms.std.numpy(), rtol=1e-6)
    assert rms.count == len(data)
    # SB2: epsilon seeds the sums and the variance is floored at 0.01
    fresh = RunningMeanStd(shape=(3,))
    np.testing.assert_allclose(fresh.std.numpy(), np.full(3, 1.0))
    fresh.update(np.ones((4, 3)))
    np.testing.assert_allclose(fresh.std_np(), np.full(3, 0.1), rtol=1e-5)
    assert list(fresh.named_variables("adversary/obfilter/")) == [
        "adversary/obfilter/runningsum:0", "adversary/obfilter/runningsumsq:0", "adversary/obfilter/count:0"]



def test_deferred_running_mean_std_writes_variables_on_flush():
    """DDPG's mode: the sums live in NumPy between flushes; pull() re-reads the variables (in-graph update, load)."""
    from sbtf.common.mpi_running_mean_std import RunningMeanStd

    rng = np.random.default_rng(2)
    data = rng.normal(size=(30, 2))
    deferred = RunningMeanStd(shape=(2,), name="obs_rms", deferred=True)
    direct = RunningMeanStd(shape=(2,), name="obs_rms")
    for rows in np.split(data, 3):
        deferred.update(rows)
        direct.update(rows)
    np.testing.assert_allclose(deferred.mean_np(), direct.mean_np(), rtol=1e-6)
    np.testing.assert_allclose(deferred.std_np(), direct.std_np(), rtol=1e-6)
    np.testing.assert_allclose(deferred.mean.numpy(), np.zeros(2))  # not flushed yet
    deferred.flush()
    np.testing.assert_allclose(deferred.mean.numpy(), direct.mean.numpy(), rtol=1e-6)
    deferred.update_tf(np.ones((10, 2)))  # an in-graph update, then pull
    deferred.pull()
    assert deferred.count == pytest.approx(1e-2 + 40)
    np.testing.assert_allclose(deferred.mean_np(), deferred.mean.numpy(), rtol=1e-6)


def test_mpi_adam_matches_plain_adam_in_one_process():
    import tensorflow as tf

    from sbtf.common.mpi_adam import MpiAdam
    from sbtf.common.optimizers import Adam

    rng = np.random.default_rng(0)
    init_a, init_b = rng.normal(size=3).astype(np.float32), rng.normal(size=(2, 5)).astype(np.float32)

    def loss_fn(a_var, b_var):
        return tf.reduce_sum(tf.square(a_var)) + tf.reduce_sum(tf.sin(b_var))

    # reference 1: the TF1-semantics Adam used by the other algorithms
    a_ref, b_ref = tf.Variable(init_a), tf.Variable(init_b)
    ref_opt = Adam([a_ref, b_ref], epsilon=1e-8)
    # reference 2: Adam written out in NumPy
    np_a, np_b = init_a.astype(np.float64), init_b.astype(np.float64)
    m, v = np.zeros(13), np.zeros(13)
    # MpiAdam, through update() (NumPy gradient + allreduce) ...
    a_var, b_var = tf.Variable(init_a), tf.Variable(init_b)
    adam = MpiAdam([a_var, b_var])
    # ... and through apply_flat_grad() inside a tf.function (the fused one-process path)
    a_fused, b_fused = tf.Variable(init_a), tf.Variable(init_b)
    fused = MpiAdam([a_fused, b_fused])

    @tf.function
    def fused_step(lr):
        with tf.GradientTape() as tape:
            loss = loss_fn(a_fused, b_fused)
        grads = tape.gradient(loss, [a_fused, b_fused])
        return fused.apply_flat_grad(tf.concat([tf.reshape(g, [-1]) for g in grads], 0), lr)

    lr = 1e-2
    for step in range(1, 21):
        with tf.GradientTape() as tape:
            loss = loss_fn(a_var, b_var)
        grads = tape.gradient(loss, [a_var, b_var])
        adam.update(np.concatenate([g.numpy().ravel() for g in grads]), lr)
        fused_step(tf.constant(lr, tf.float32))
        with tf.GradientTape() as tape:
            loss = loss_fn(a_ref, b_ref)
        ref_opt.apply(tape.gradient(loss, [a_ref, b_ref]), lr)
        grad_np = np.concatenate([2 * np_a, np.cos(np_b).ravel()])
        m = 0.9 * m + 0.1 * grad_np
        v = 0.999 * v + 0.001 * grad_np ** 2
        step_size = lr * np.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
        theta = np.concatenate([np_a, np_b.ravel()]) - step_size * m / (np.sqrt(v) + 1e-8)
        np_a, np_b = theta[:3], theta[3:].reshape(2, 5)
    assert adam.step == fused.step == 20
    np.testing.assert_allclose(adam.getflat(), fused.getflat(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a_var.numpy(), a_ref.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b_var.numpy(), b_ref.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(adam.getflat(), np.concatenate([np_a, np_b.ravel()]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(adam.exp_avg, m, rtol=1e-4, atol=1e-6)
    adam.sync()
    adam.check_synced()  # one process: trivially in sync
    with pytest.raises(ValueError, match="expected a gradient of 13"):
        adam.update(np.zeros(4), lr)


def test_without_mpi4py_everything_runs_in_one_process():
    """mpi4py absent (blocked): the stand-in is used silently, PPO1 trains; asking for MPI explicitly explains."""
    result = _run_python("""
        import sys
        sys.modules["mpi4py"] = None  # makes `import mpi4py` fail
        import gymnasium as gym, numpy as np
        from sbtf.common import mpi_util
        from sbtf.common.mpi_adam import MpiAdam
        from sbtf import PPO1
        assert isinstance(mpi_util.get_comm(), mpi_util.SingleProcessComm)
        model = PPO1("MlpPolicy", gym.make("CartPole-v1"), timesteps_per_actorbatch=64, optim_batchsize=32,
                     optim_epochs=1, seed=0)
        model.learn(128)
        assert model.num_timesteps == 128 and model.rank == 0 and model.nworkers == 1
        try:
            mpi_util.get_comm(require=True)
        except mpi_util.MPIUnavailableError as exc:
            print("REQUIRE-MESSAGE:", exc)
        print("OK")
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stdout
    assert "pip install \"sbtf[mpi]\"" in result.stdout and "REQUIRE-MESSAGE: MPI was requested" in result.stdout


def test_launched_by_mpirun_without_mpi4py_fails_clearly():
    """Under an MPI launcher with several processes, a missing mpi4py is an error, not N independent runs."""
    env = {**CHILD_ENV, "PMI_RANK": "0", "PMI_SIZE": "2"}
    result = _run_python("""
        import sys
        sys.modules["mpi4py"] = None
        from sbtf.common import mpi_util
        mpi_util.get_comm()  # what every MPI algorithm asks for first (tested under mpirun below)
    """, env=env)
    assert result.returncode != 0
    assert "MPIUnavailableError" in result.stderr
    assert "started by an MPI launcher as one of 2 processes" in result.stderr
    assert "sbtf[mpi]" in result.stderr


# ------------------------------------------------------------------------------------------ mpirun -np 2
SYNC_SCRIPT = """
import os, sys
import gymnasium as gym
import numpy as np
from sbtf import GAIL, PPO1, TRPO
from sbtf.common.callbacks import BaseCallback
from sbtf.common.mpi_util import get_comm
from sbtf.gail import ExpertDataset

comm = get_comm()
rank = comm.Get_rank()
out_dir = sys.argv[1]
rng = np.random.default_rng(0)  # the same expert data on both ranks
obs = rng.normal(size=(200, 4)).astype(np.float32)
starts = np.zeros(200, bool)
starts[::50] = True
expert = dict(obs=obs, actions=(obs[:, 2:3] > 0).astype(np.int64), rewards=np.ones(200, np.float32),
              episode_returns=np.full(4, 50.0), episode_starts=starts)
makers = {
    "PPO1": lambda env: PPO1("MlpPolicy", env, seed=3, timesteps_per_actorbatch=64, optim_batchsize=32, optim_epochs=2),
    "TRPO": lambda env: TRPO("MlpPolicy", env, seed=3, timesteps_per_batch=128, vf_iters=2),
    "GAIL": lambda env: GAIL("MlpPolicy", env, ExpertDataset(traj_data=expert, verbose=0), seed=3,
                             timesteps_per_batch=128, vf_iters=2, g_step=1),
}
for name, make in makers.items():
    model = make(gym.make("CartPole-v1"))
    first_obs = model.env.reset()
    model.learn(512)
    params = np.concatenate([v.ravel() for v in model.get_parameters().values()])
    all_params = comm.allgather(params)
    all_obs = comm.allgather(first_obs)
    model.check_parameters_synced()
    synced = all(np.array_equal(all_params[0], p) for p in all_params)
    different_data = not np.array_equal(all_obs[0], all_obs[1])
    model.save(os.path.join(out_dir, f"{name}_rank{rank}"))
    print(f"RESULT {name} rank={rank} synced={synced} different_data={different_data} "
          f"num_timesteps={model.num_timesteps}", flush=True)


class StopOnRankOne(BaseCallback):
    def _on_step(self):
        return not (rank == 1 and self.n_calls >= 10)


# a callback that stops on one rank only: every rank leaves learn() (no rank waits forever in a collective)
model.learn(10 ** 6, callback=StopOnRankOne())
model.check_parameters_synced()
print(f"STOPPED rank={rank} num_timesteps={model.num_timesteps}", flush=True)
"""

HELPERS_SCRIPT = """
import numpy as np
import tensorflow as tf
from sbtf.common.mpi_adam import MpiAdam
from sbtf.common.mpi_moments import mpi_moments
from sbtf.common.mpi_running_mean_std import RunningMeanStd
from sbtf.common.mpi_util import MpiSyncError, allreduce_tf, get_comm, sync_check

comm = get_comm()
rank = comm.Get_rank()
rng = np.random.default_rng(0)
parts = [rng.normal(size=(3, 2)), rng.normal(size=(5, 2))]  # rank r holds parts[r]
whole = np.concatenate(parts)
mean, std, count = mpi_moments(parts[rank], axis=0)
assert count == 8 and np.allclose(mean, whole.mean(axis=0)) and np.allclose(std, whole.std(axis=0))

rms = RunningMeanStd(epsilon=0.0, shape=(2,))
rms.update(parts[rank])
assert np.allclose(rms.mean.numpy(), whole.mean(axis=0)) and np.allclose(rms.std.numpy(), whole.std(axis=0))

grads = [np.array([1.0, -2.0, 3.0], np.float32), np.array([3.0, 0.0, -1.0], np.float32)]
var = tf.Variable(np.zeros(3, np.float32))
adam = MpiAdam([var])
adam.update(grads[rank], 0.1)  # first Adam step on the mean gradient [2, -1, 1]: -0.1 * sign
assert np.allclose(var.numpy(), [-0.1, 0.1, -0.1], atol=1e-6), var.numpy()
fused = tf.function(lambda g: adam.update_tf(g, tf.constant(0.1)), autograph=False)
fused(tf.constant(grads[rank]))
adam.check_synced()

summed = tf.function(lambda x: allreduce_tf(x, mean=False), autograph=False)(tf.constant(grads[rank]))
assert np.allclose(summed.numpy(), grads[0] + grads[1])

try:
    sync_check(np.array([float(rank)]), name="test values")
except MpiSyncError as exc:
    assert "ranks [1]" in str(exc), exc
    print(f"HELPERS_OK rank={rank}", flush=True)
"""

FAIL_SCRIPT = """
import gymnasium as gym
from sbtf import PPO1
from sbtf.common.mpi_util import get_rank


class Exploding(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.n_steps = 0

    def step(self, action):
        self.n_steps += 1
        if get_rank() == 1 and self.n_steps > 100:
            raise RuntimeError("simulated failure on rank 1")
        return self.env.step(action)


model = PPO1("MlpPolicy", Exploding(gym.make("CartPole-v1")), seed=0, timesteps_per_actorbatch=64,
             optim_batchsize=32, optim_epochs=1)
model.learn(10 ** 7)
print("UNREACHABLE", flush=True)
"""

UNCAUGHT_SCRIPT = """
from sbtf.common import mpi_util

comm = mpi_util.get_comm()
mpi_util.install_abort_excepthook()
if comm.Get_rank() == 1:
    raise KeyError("uncaught on rank 1")
comm.Barrier()  # rank 0 would wait here forever without the abort
print("UNREACHABLE", flush=True)
"""


@pytest.mark.mpi
@requires_mpirun
def test_mpirun_ppo1_trpo_gail_keep_ranks_in_sync(tmp_path):
    script = tmp_path / "sync_script.py"
    script.write_text(SYNC_SCRIPT)
    result = _mpirun(script, str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    # the two ranks write to the same stdout: lines may interleave, so search rather than split
    results = re.findall(r"RESULT \w+ rank=\d synced=\w+ different_data=\w+ num_timesteps=\d+", result.stdout)
    assert len(results) == 6, result.stdout
    for algo in ("PPO1", "TRPO", "GAIL"):
        for rank in (0, 1):
            # identical parameters, different experience (seed + 10000 * rank), steps counted over both ranks
            assert f"RESULT {algo} rank={rank} synced=True different_data=True num_timesteps=512" in results, results
        assert (tmp_path / f"{algo}_rank0.zip").exists()
        assert not (tmp_path / f"{algo}_rank1.zip").exists()  # only rank 0 saves
    # both ranks left learn() although only rank 1's callback stopped, and agree on the step count
    stopped = re.findall(r"STOPPED rank=(\d) num_timesteps=(\d+)", result.stdout)
    assert sorted(rank for rank, _ in stopped) == ["0", "1"], result.stdout
    assert len({steps for _, steps in stopped}) == 1, stopped


@pytest.mark.mpi
@requires_mpirun
def test_mpirun_collective_helpers(tmp_path):
    script = tmp_path / "helpers_script.py"
    script.write_text(HELPERS_SCRIPT)
    result = _mpirun(script, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert sorted(re.findall(r"HELPERS_OK rank=(\d)", result.stdout)) == ["0", "1"], result.stdout


@pytest.mark.mpi
@requires_mpirun
def test_mpirun_failing_rank_aborts_the_job(tmp_path):
    script = tmp_path / "fail_script.py"
    script.write_text(FAIL_SCRIPT)
    start = time.time()
    result = _mpirun(script, timeout=240)  # a hang would raise subprocess.TimeoutExpired
    assert result.returncode != 0
    assert "UNREACHABLE" not in result.stdout
    assert "[sbtf] MPI rank 1 of 2 failed in PPO1.learn(): RuntimeError: simulated failure on rank 1" in result.stderr
    assert time.time() - start < 240


@pytest.mark.mpi
@requires_mpirun
def test_mpirun_uncaught_exception_outside_learn_aborts(tmp_path):
    script = tmp_path / "uncaught_script.py"
    script.write_text(UNCAUGHT_SCRIPT)
    result = _mpirun(script, timeout=120)
    assert result.returncode != 0
    assert "UNREACHABLE" not in result.stdout
    assert "MPI rank 1 of 2: uncaught KeyError" in result.stderr
