"""Pure estimators on op lists, specs and devices: roofline, memory, time, cost."""
