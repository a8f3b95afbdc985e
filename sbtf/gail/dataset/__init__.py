"""Expert datasets (stable-baselines 2.x format) for behaviour cloning and GAIL."""
from sbtf.gail.dataset.dataset import DataLoader, ExpertDataset
from sbtf.gail.dataset.record_expert import generate_expert_traj

__all__ = ["DataLoader", "ExpertDataset", "generate_expert_traj"]
