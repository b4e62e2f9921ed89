"""The search over configurations (a sweep's `search:`): which configurations are measured, how long, in what
order, and what a predictor (AIConfigurator) expected of them."""
