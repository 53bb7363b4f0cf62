"""P-Zombie evaluation of PX-Engine zone routing (seed 002): prereg, metrics, rules, rescorer, figures."""
