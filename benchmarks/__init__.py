"""Preregistered protocols, one package each, and the shared ``core`` they stand on."""
