//! The names of a Hugging Face model directory's files, in one place: what
//! tuneline reads, hashes and downloads from a directory is named here.

/// The architecture and shape of the model.
pub const CONFIG: &str = "config.json";
/// The tokenizer (`tokenizers`' JSON).
pub const TOKENIZER: &str = "tokenizer.json";
/// Special tokens, and the chat template as transformers 4 saved it.
pub const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// The special tokens again, as older tools read them.
pub const SPECIAL_TOKENS_MAP: &str = "special_tokens_map.json";
/// Which shard holds each tensor, when the weights are sharded.
pub const INDEX: &str = "model.safetensors.index.json";
/// The chat template as transformers 5 saves it (and many current Hub repositories hold it).
pub const CHAT_TEMPLATE_JINJA: &str = "chat_template.jinja";
/// The chat template as a processor saves it: `{"chat_template": "..."}`.
pub const CHAT_TEMPLATE_JSON: &str = "chat_template.json";

/// Where a directory's chat template may be, first found first: transformers
/// 5 reads `chat_template.jinja` before the older places.
pub const CHAT_TEMPLATES: [&str; 3] = [CHAT_TEMPLATE_JINJA, CHAT_TEMPLATE_JSON, TOKENIZER_CONFIG];

/// The files besides the weights that decide what a directory's model
/// computes: its shape, tokenizer and chat template.
pub const DEFINING: [&str; 5] =
    [CONFIG, TOKENIZER, TOKENIZER_CONFIG, CHAT_TEMPLATE_JINJA, CHAT_TEMPLATE_JSON];

/// The SentencePiece model that `tokenizer.json` was converted from (Gemma,
/// Llama 2): its pieces' scores and types go into a GGUF's vocabulary.
pub const SENTENCEPIECE: &str = "tokenizer.model";
