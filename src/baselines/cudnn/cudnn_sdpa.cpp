// placeholder until the cuDNN baseline lands
