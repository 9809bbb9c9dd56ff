"""One module per model family whose config the common decoder (kvplan.readers.configs) does not describe; registered in
kvplan.readers.READERS."""
