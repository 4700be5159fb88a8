"""Optimisation shared by pretraining and task fine-tuning (ULMFiT, Howard and Ruder 2018):
layer groups with discriminative learning rates, gradual unfreezing, learning-rate schedules."""
