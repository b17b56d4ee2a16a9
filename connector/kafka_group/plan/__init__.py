"""Planning decisions: batch plans, starting positions, data-loss checks, AvailableNow targets,
trigger thresholds, bounded batch reads."""
