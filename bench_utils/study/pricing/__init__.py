"""What a run costs before it runs, with no torch: a cell's earlier records (``recorded``), else an a-priori
model for a GPU (``prior``) calibrated by those records (``device_prices``); the dry run's plan (``plan``,
``plan_text``) and what a time limit counts (``cell_costs``). Imports run one way: recorded <- prior <-
device_prices <- plan <- plan_text, and cell_costs beside plan."""
