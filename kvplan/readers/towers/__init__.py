"""Vision and audio towers: a multimodal config's encoder weights, counted exactly or refused."""
