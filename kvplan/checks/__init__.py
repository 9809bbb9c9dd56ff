"""An engine's own output against kvplan: start-up logs (check-log)."""
