"""The gate: correctness against the oracle, integrity of the candidate's process, and the one timer."""
