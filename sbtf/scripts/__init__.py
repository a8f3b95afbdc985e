"""stable-baselines 2's runnable scripts, on sbtf.

stable-baselines 2 shipped example and experiment scripts inside its algorithm packages (``ddpg/main.py``,
``<algo>/run_atari.py``, ``deepq/experiments/*.py``, ``ppo1/experiments/train_cartpole.py``) and ran some modules
as self-tests (``python -m stable_baselines.common.mpi_adam`` under ``mpirun``). This package has them under the
same paths -- ``sbtf.scripts.<SB2 path>`` -- with SB2's functions and command-line flags, written for sbtf and
gymnasium::

    python -m sbtf.scripts.ddpg.main --env-id Pendulum-v1 --num-timesteps 2000
    python -m sbtf.scripts.deepq.experiments.train_cartpole --max-timesteps 1000
    mpirun -np 2 python -m sbtf.scripts.common.mpi_adam

With the ``stable_baselines`` compatibility package installed, ``python -m stable_baselines.<SB2 path>`` and
``import stable_baselines.<SB2 path>`` run / import these modules.
"""
