"""Fiction-CWR: closed-world recombination, the F minus C exact-validity deficit with P/R/E controls."""
