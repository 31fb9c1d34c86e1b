"""InTune's search, one phase per module, over one :class:`~optimizers.intune.state.SearchState`.

* :mod:`.start`: where the search starts (the model's best and its near-tied CPU splits);
* :mod:`.model_fit`: the model re-fitted to the live measurements, and the plausible models;
* :mod:`.step`: one best-first step ranked by the agent plus the model, and the agent's fine-tuning;
* :mod:`.jump`: a jump to where the re-fitted model says the best is;
* :mod:`.escape`: on a stall, an escape several moves away, or an exploration while not sure;
* :mod:`.confirm`: the final race of the finalists (best configurations, another CPU split, larger buffers), the pick;
* :mod:`.budget`: when the search stops and what the time budget still holds.
"""
