"""RES Step 0 response-interface and capability gate (seed 000)."""
