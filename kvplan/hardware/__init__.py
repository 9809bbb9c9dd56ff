"""What kvplan plans on: GPU profiles (profiles/*.yaml, each figure sourced) and prices."""
