//! Speaker roles and the aliases datasets use for them.

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person asking (`user`, `human`).
    User,
    /// The model answering (`assistant`, `gpt`).
    Assistant,
}

impl Role {
    /// The role an alias stands for; `None` for a role that is not known (it is
    /// counted and reported, never guessed).
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "system" => Some(Role::System),
            "human" | "user" => Some(Role::User),
            "gpt" | "assistant" | "chatgpt" | "bing" | "bard" | "model" => Some(Role::Assistant),
            _ => None,
        }
    }

    /// The name chat templates use.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}
