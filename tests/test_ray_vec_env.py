"""RayVecEnv on a real local Ray cluster: a head and two worker node processes (not local_mode), all on 127.0.0.1."""
from __future__ import annotations

import functools
import os
import signal
import sys
import time

import gymnasium
import numpy as np
import pytest

# Every node of the test cluster on the loopback address: Ray otherwise advertises the machine's own interface
# address (read when ray is imported, hence before the import)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'sbtf[ray]')")

from sbtf.common.cmd_util import make_vec_env  # noqa: E402
from sbtf.common.vec_env import DummyVecEnv, VecEnvWorkerError  # noqa: E402
from sbtf.common.vec_env.ray_vec_env import RayVecEnv  # noqa: E402

# the envs below travel to the actors by value (the actors cannot import this test module)
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

LOCAL = "127.0.0.1"


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    node = dict(num_cpus=2, node_ip_address=LOCAL, include_dashboard=False)
    if ray.util.get_node_ip_address() != LOCAL:
        pytest.skip("ray was imported before this module could keep its test cluster on 127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=node)
    cluster.add_node(**{k: v for k, v in node.items() if k != "include_dashboard"})
    cluster.add_node(**{k: v for k, v in node.items() if k != "include_dashboard"})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, include_dashboard=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


class FailingEnv(gymnasium.Wrapper):
    """CartPole that raises at its ``fail_at``-th step."""

    def __init__(self, fail_at: int):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.fail_at, self.steps = fail_at, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError("the simulator lost its licence")
        return self.env.step(action)


def cartpole_fns(n):
    return [functools.partial(gymnasium.make, "CartPole-v1") for _ in range(n)]


def test_same_trajectories_as_dummy_vec_env_across_nodes(cluster):
    env = RayVecEnv(cartpole_fns(4), envs_per_actor=2, actor_options=dict(num_cpus=1))
    reference = DummyVecEnv(cartpole_fns(4))
    env.seed(7)
    reference.seed(7)
    assert np.array_equal(env.reset(), reference.reset())
    rng = np.random.default_rng(0)
    n_done = 0
    for _ in range(120):
        actions = rng.integers(0, 2, size=4)
        obs, rewards, dones, infos = env.step(actions)
        ref_obs, ref_rewards, ref_dones, ref_infos = reference.step(actions)
        assert np.array_equal(obs, ref_obs) and np.array_equal(rewards, ref_rewards)
        assert np.array_equal(dones, ref_dones)
        for i in np.flatnonzero(dones):
            n_done += 1
            assert np.array_equal(infos[i]["terminal_observation"], ref_infos[i]["terminal_observation"])
            assert infos[i]["TimeLimit.truncated"] == ref_infos[i]["TimeLimit.truncated"]
    assert n_done > 0
    # SPREAD placement: the actors sit on more than one node of the cluster
    assert len({location["node_id"] for location in env.nodes}) > 1
    assert env.get_attr("spec", indices=[3])[0].id == "CartPole-v1"
    env.close()
    reference.close()


def test_make_vec_env_monitor_infos_and_learning(cluster):
    from sbtf import PPO2

    env = make_vec_env("CartPole-v1", n_envs=2, seed=0, vec_env_cls=RayVecEnv,
                       vec_env_kwargs=dict(actor_options=dict(num_cpus=1)))
    model = PPO2("MlpPolicy", env, n_steps=64, seed=0)
    model.learn(512)
    assert len(model.ep_info_buf) > 0  # the Monitor inside each actor reports its episodes
    env.close()


def test_an_env_that_raises_is_named_with_its_node(cluster):
    fns = cartpole_fns(2) + [functools.partial(FailingEnv, 3)]
    env = RayVecEnv(fns, envs_per_actor=1, actor_options=dict(num_cpus=1))
    env.reset()
    env.step(np.zeros(3, dtype=int))
    env.step(np.zeros(3, dtype=int))
    with pytest.raises(VecEnvWorkerError) as info:
        env.step(np.zeros(3, dtype=int))
    message = str(info.value)
    assert "env 2 on node 127.0.0.1" in message and "RuntimeError" in message and "licence" in message
    env.close()


def test_a_killed_actor_is_reported_not_waited_for(cluster):
    env = RayVecEnv(cartpole_fns(2), envs_per_actor=1, actor_options=dict(num_cpus=1), timeout=60)
    env.reset()
    os.kill(env.nodes[1]["pid"], signal.SIGKILL)
    with pytest.raises(VecEnvWorkerError, match=r"actor of env 1 on node 127\.0\.0\.1 .* died"):
        env.step(np.zeros(2, dtype=int))
    env.close()


def test_close_releases_the_actors(cluster):
    env = RayVecEnv(cartpole_fns(2), envs_per_actor=2, actor_options=dict(num_cpus=1))
    actor = env._actors[0]
    env.reset()
    env.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # ray.kill is asynchronous: poll until the actor is gone
        try:
            ray.get(actor.spaces.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the actor still answers after close()")
    env.close()  # closing twice is harmless


def test_bad_arguments_are_refused(cluster):
    with pytest.raises(ValueError, match="at least one env"):
        RayVecEnv([])
    with pytest.raises(ValueError, match="envs_per_actor"):
        RayVecEnv(cartpole_fns(1), envs_per_actor=0)
