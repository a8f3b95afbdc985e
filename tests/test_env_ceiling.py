"""benchmarks/env_ceiling.py: the env-only rate of a case's VecEnv and the ceiling ratio built from it."""
import json
import os

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.fixture()
def env_ceiling(monkeypatch):
    monkeypatch.syspath_prepend(BENCHMARKS)
    import env_ceiling as module
    return module


def test_env_only_rate_steps_the_cases_vec_env(env_ceiling):
    import worker
    case = worker._load_cases().CASES["ppo_cartpole_zoo"]
    row = env_ceiling.measure(case, vec_steps=30, warmup=5)
    assert row["n_envs"] == case.n_envs == 8 and row["vec_steps"] == 30
    assert row["env_steps_per_s"] > 0 and row["env_steps_per_cpu_s"] > 0


def test_action_bank_draws_valid_actions_for_every_sub_env(env_ceiling):
    import worker
    case = worker._load_cases().CASES["sac_pendulum"]
    env = worker._make_env("sbtf", case, case.side("sbtf"), seed=0)
    bank = env_ceiling._action_bank(env, 3)
    assert len(bank) == 3 and all(len(batch) == env.num_envs for batch in bank)
    assert all(env.action_space.contains(a) for batch in bank for a in batch)
    env.close()


def test_ceiling_table_reads_the_harness_results(env_ceiling, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    results.mkdir()
    summary = {"sbtf": {"steps_per_s_median": 500.0}, "sb3": {"steps_per_s_median": 250.0}}
    (results / "ppo_cartpole_zoo.json").write_text(json.dumps({"summary": summary, "meta": {"date": "d"}}))
    monkeypatch.setattr(env_ceiling, "RESULTS", str(results))
    monkeypatch.setattr(env_ceiling, "measure", lambda case, vec_steps: {"env_steps_per_s": 1000.0})
    # the script sets TF's threads in its fresh process; here TF may already run
    monkeypatch.setattr(env_ceiling.worker, "_setup_sbtf", lambda threads: {})
    monkeypatch.setattr(env_ceiling.worker, "thread_env", lambda threads: {})  # no thread variables leak out
    assert env_ceiling.main(["--cases", "ppo_cartpole_zoo"]) == 0
    out = capsys.readouterr().out
    assert "| `ppo_cartpole_zoo` | 8 | 1,000 | 250 | 500 | 4.00 | 2.00 | 50% |" in out
    written = json.loads((results / "env_ceiling.json").read_text())
    assert written["cases"]["ppo_cartpole_zoo"]["ceiling_ratio"] == pytest.approx(4.0)
    with pytest.raises(SystemExit):
        env_ceiling.main(["--cases", "no_such_case"])
