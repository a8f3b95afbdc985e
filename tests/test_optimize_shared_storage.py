"""``sbtf optimize`` with a study that several processes share: Optuna's journal file and a real PostgreSQL server
started by the test; no trial lost or run twice, interrupted and killed workers' trials run again."""
from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

optuna = pytest.importorskip("optuna", reason="the optimize extra (pip install 'sbtf[optimize]')")

from sbtf.cli.optimize import make_storage  # noqa: E402

OPTIMIZE = [sys.executable, "-c", "import sys; from sbtf.cli import main; sys.exit(main())", "optimize"]
# a tiny budget: 600 steps of A2C per trial on CartPole, evaluated twice
TINY = ["--algo", "a2c", "--env", "CartPole-v1", "-n", "600", "--n-envs", "1", "--n-evaluations", "2",
        "--eval-episodes", "2", "--sampler", "random", "--pruner", "none", "--verbose", "1"]


def _optimize(storage: str, out: str, n_trials: int, *extra: str) -> subprocess.Popen:
    argv = OPTIMIZE + TINY + ["--storage", storage, "--study-name", "shared", "--n-trials", str(n_trials),
                              "-o", out, *extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _finish(process: subprocess.Popen) -> str:
    out, _ = process.communicate(timeout=600)
    assert process.returncode == 0, out
    return out


def _two_workers_share_one_study(storage_url: str, tmp_path) -> None:
    workers = [_optimize(storage_url, str(tmp_path / f"out{i}"), 3) for i in range(2)]
    outputs = [_finish(worker) for worker in workers]
    study = optuna.load_study(study_name="shared", storage=make_storage(optuna, storage_url))
    trials = study.get_trials(deepcopy=False)
    numbers = sorted(trial.number for trial in trials)
    assert numbers == list(range(6))  # 3 + 3 trials, none lost, none duplicated
    assert all(trial.state == optuna.trial.TrialState.COMPLETE for trial in trials)
    assert len({trial.user_attrs["worker"] for trial in trials}) == 2  # both processes ran trials
    for output in outputs:
        assert "Best trial:" in output


def test_two_processes_share_a_journal_study(tmp_path):
    _two_workers_share_one_study("journal:{}".format(tmp_path / "studies" / "shared.log"), tmp_path)


def test_a_killed_worker_trial_runs_again(tmp_path):
    storage_url = "journal:{}".format(tmp_path / "shared.log")
    # a long trial (-n overrides TINY's), killed while it runs
    worker = _optimize(storage_url, str(tmp_path / "out0"), 1, "-n", "200000")
    storage = make_storage(optuna, storage_url)
    deadline = time.monotonic() + 300
    running = None
    while time.monotonic() < deadline and running is None:
        time.sleep(0.5)
        try:
            study = optuna.load_study(study_name="shared", storage=storage)
        except KeyError:  # not created yet
            continue
        running = next((t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING
                        and "worker" in t.user_attrs and "hyperparams" in t.user_attrs), None)
    assert running is not None, "the first worker never started its trial"
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=60)
    output = _finish(_optimize(storage_url, str(tmp_path / "out1"), 1))
    assert "1 trial(s) of a process that died are queued again" in output
    study = optuna.load_study(study_name="shared", storage=make_storage(optuna, storage_url))
    retried = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("retried_from") == running.number]
    assert len(retried) == 1 and retried[0].params == running.params
    assert retried[0].state == optuna.trial.TrialState.COMPLETE
    assert study.get_trials(deepcopy=False)[running.number].state == optuna.trial.TrialState.FAIL


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def postgres(tmp_path):
    """A PostgreSQL server on 127.0.0.1 in a fresh data folder, for one test."""
    pytest.importorskip("psycopg", reason="PostgreSQL storage needs psycopg (pip install 'sbtf[optimize]')")
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or ([shutil.which("initdb")]
                                                                      if shutil.which("initdb") else [])
    if not found:
        pytest.skip("no PostgreSQL server on this machine (apt-get install postgresql)")
    bindir = os.path.dirname(found[-1])
    # a folder of its own: pytest's tmp_path sits below a folder only its owner may enter
    home = tempfile.mkdtemp(prefix="sbtf-pg-")
    data = os.path.join(home, "pgdata")
    os.mkdir(data)
    prefix = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as the postgres user
        if subprocess.run(["id", "postgres"], capture_output=True).returncode != 0:
            pytest.skip("running as root without a postgres user to start PostgreSQL as")
        shutil.chown(home, "postgres")
        shutil.chown(data, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    try:
        subprocess.run(prefix + [f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres"], check=True,
                       capture_output=True)
        subprocess.run(prefix + [f"{bindir}/pg_ctl", "-D", data, "-w", "-l", os.path.join(home, "log"), "-o",
                                 f"-p {port} -k {home} -c listen_addresses=127.0.0.1", "start"], check=True,
                       capture_output=True)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [f"{bindir}/pg_ctl", "-D", data, "-w", "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def test_two_processes_share_a_postgresql_study(postgres, tmp_path):
    _two_workers_share_one_study(postgres, tmp_path)


def test_bad_storage_says_what_to_write(tmp_path):
    from sbtf.cli import main

    assert main(["optimize"] + TINY + ["--storage", "journal:", "-o", str(tmp_path)]) != 0


OPEN_STUDY = ("import sys, optuna; from sbtf.cli.optimize import make_storage; "
              "optuna.create_study(study_name='race', storage=make_storage(optuna, sys.argv[1]), "
              "load_if_exists=True, direction='maximize')")


def test_workers_started_together_on_an_empty_database_all_open_the_study(postgres):
    # Optuna's tables do not exist yet: every worker tries to create them at once, and all but one lose the race
    # (a duplicate type or table); each must open the storage anyway
    workers = [subprocess.Popen([sys.executable, "-c", OPEN_STUDY, postgres], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    for worker in workers:
        _finish(worker)
    assert len(optuna.study.get_all_study_names(storage=postgres)) == 1
