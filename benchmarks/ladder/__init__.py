"""Capability ladder: calibration probes, gate clauses, instrument verdict, retune rule and feasibility arithmetic."""
