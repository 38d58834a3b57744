//! The Hugging Face Hub's model repositories as tuneline names them:
//! `hf://ORG/NAME[@REVISION]`, for pulling a base model and pushing a delivery.

/// The Hub's address.
pub const HUB: &str = "https://huggingface.co";

/// `hf://USER/REPO[@REVISION]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRepo {
    /// `USER/REPO`.
    pub repo: String,
    /// The branch committed to (`main` when omitted).
    pub revision: String,
}

/// A target that is not `hf://USER/REPO[@REVISION]` (the target as written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a Hub model repository; write hf://USER/REPO or hf://USER/REPO@BRANCH")]
pub struct NotAHubRepo(pub String);

impl HubRepo {
    /// Parses `hf://USER/REPO[@REVISION]`.
    pub fn parse(target: &str) -> Result<Self, NotAHubRepo> {
        let bad = || NotAHubRepo(target.to_string());
        let rest = target.strip_prefix("hf://").ok_or_else(bad)?;
        let (repo, revision) = rest.split_once('@').unwrap_or((rest, "main"));
        let parts: Vec<&str> = repo.split('/').collect();
        if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) || revision.is_empty() {
            return Err(bad());
        }
        Ok(Self { repo: repo.into(), revision: revision.into() })
    }
}
