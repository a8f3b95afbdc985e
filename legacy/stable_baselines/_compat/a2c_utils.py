"""``stable_baselines.a2c.utils`` for sbtf: the ``Scheduler`` of A2C/ACER/ACKTR and its named schedules, plus the
helpers of that module that have sbtf equivalents. (TF1 graph helpers such as ``conv``/``lstm``/``batch_to_seq``
were replaced by the Keras layers of ``sbtf.common.tf_layers``.)"""
from sbtf.common.math_util import total_episode_reward_logger
from sbtf.common.schedules import (SCHEDULES, Scheduler, constant, double_linear_con, double_middle_drop,
                                   linear_schedule, middle_drop)
from sbtf.common.tf_layers import ortho_init

__all__ = ["Scheduler", "SCHEDULES", "constant", "linear_schedule", "middle_drop", "double_linear_con",
           "double_middle_drop", "ortho_init", "total_episode_reward_logger"]
