"""The capability ladder's campaign arm: its frozen registration, rescorer and self-checks (the code is
``benchmarks.ladder.campaign``, beside the probe it builds on)."""
