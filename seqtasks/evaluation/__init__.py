"""What evaluation records beside a task's metrics: TensorBoard summaries, scores by source length, `seqtasks compare`'s plots."""
