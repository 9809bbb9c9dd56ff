"""One plan's arithmetic and the deployments it runs on: KV profiles, budgets, verdicts, tp/pp/dp/ep layouts, drafters."""
