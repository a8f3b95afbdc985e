"""``stable_baselines.a2c.utils`` for sbtf: the ``Scheduler`` of A2C/ACER/ACKTR and its named schedules, plus the
helpers of that module that have sbtf equivalents: SB2's functional layers (``conv``, ``linear``, ``conv_to_fc``,
``lstm``, ``lnlstm``, ``batch_to_seq``, ``seq_to_batch``) are those of ``sbtf.common.tf_layers`` (Keras layers with
SB2's variable names; see ``FunctionalCnnExtractor``)."""
from sbtf.common.math_util import total_episode_reward_logger
from sbtf.common.schedules import (SCHEDULES, Scheduler, constant, double_linear_con, double_middle_drop,
                                   linear_schedule, middle_drop)
from sbtf.common.tf_layers import (batch_to_seq, conv, conv_to_fc, linear, lnlstm, lstm, ortho_init,
                                   seq_to_batch)

__all__ = ["Scheduler", "SCHEDULES", "constant", "linear_schedule", "middle_drop", "double_linear_con",
           "double_middle_drop", "ortho_init", "total_episode_reward_logger", "conv", "linear", "conv_to_fc", "lstm",
           "lnlstm", "batch_to_seq", "seq_to_batch"]
