"""Why a published number does not reproduce: static detectors and counterfactual replays."""
