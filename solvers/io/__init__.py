"""Reading and writing networks: torch encoder modules, Hugging Face models in memory or as
`save_pretrained` directories, safetensors files read without torch, and tide's own model
files. Readers turn weights into the equation's LayerWeights and a Model; nothing is ever
unpickled (docs/networks.md)."""
