//! From a [`Config`] to what the method needs: [`TmasParams`] (N, M, T, ε, sampling per
//! role, …), the prompt-template overrides, and the roles the configured method calls.
//! In the method layer: the config knows nothing of the method's types.

use crate::config::{Config, ConfigIssue, MethodConfig};
use crate::method::baselines;
use crate::method::{PromptOverrides, RoleCall, RoleCalls, TmasParams, TmasStrategy};
use crate::role::Role;

impl MethodConfig {
    /// The roles this method calls, as the method declares them ([`TmasStrategy::roles`],
    /// each baseline's module), in [`Role::ALL`] order: a run's role pools (in the order
    /// the runtime takes as the calls' stage order), the endpoints the start-up check
    /// probes and the roles a benchmark sizes. The judges are the evaluation's, not the
    /// method's: they are never listed.
    pub fn roles(&self) -> &'static [Role] {
        baselines::roles(self.name, self.rse_dedup)
            .unwrap_or_else(|| TmasStrategy::roles(self.bank_dedup))
    }
}

impl Config {
    /// The TMAS parameters, with derived defaults applied.
    pub fn tmas_params(&self) -> TmasParams {
        let m = &self.method;
        TmasParams {
            n: m.n as usize,
            m: m.m as usize,
            iterations: m.iterations,
            epsilon: m.epsilon,
            max_rollouts: m.max_rollouts.map(|v| v as usize),
            include_past_solutions: m.include_past_solutions,
            no_proof: m.no_proof,
            strict_verification: m.strict_verification,
            early_stop: m.early_stop,
            use_experience: m.use_experience,
            use_guideline: m.use_guideline,
            dedup_threshold: m.dedup_threshold,
            bank_embeddings: m.bank_dedup.uses_embeddings(),
            embedding_threshold: m.embedding_threshold,
            max_verification_attempts: m.effective_max_verification_attempts(),
            max_bank_attempts: m.max_bank_attempts,
            seed: self.run.seed,
            release_texts: false,
            roles: RoleCalls::from_fn(|role| self.role_call(role)),
        }
    }

    /// Sampling of `role` and whether its calls stream: they do when every endpoint of
    /// the role's group has `stream = true` (a mixed group does not stream, the setting
    /// every server supports).
    pub fn role_call(&self, role: Role) -> RoleCall {
        let eps = self.role_endpoints(role);
        let stream = !eps.is_empty()
            && eps
                .iter()
                .all(|e| self.endpoints.get(e).is_some_and(|e| e.stream));
        RoleCall {
            sampling: self.roles[role].sampling(),
            stream,
        }
    }

    /// Template name → replacement file: `[prompts]` plus each `roles.ROLE.prompt` (as the
    /// template named after the role).
    pub fn prompt_overrides(&self) -> PromptOverrides {
        let mut out = self.prompts.clone();
        for role in Role::ALL {
            if let Some(p) = &self.roles[role].prompt {
                out.insert(role.as_str().to_string(), p.clone());
            }
        }
        out
    }
}

impl Config {
    /// Warnings of `tmas config check` that depend on the roles the method calls: an
    /// endpoint (not the simulator, which answers both) that would get embeddings calls
    /// and chat completions, from the method's chat roles or the judge. A vLLM or SGLang
    /// server serves one model, so one of the two kinds of call would fail.
    pub fn endpoint_sharing_issues(&self) -> Vec<ConfigIssue> {
        let roles = self.method.roles();
        if !roles.iter().any(|r| r.is_embedding()) {
            return Vec::new();
        }
        let judge = self.judge.enabled.then_some(Role::Judge);
        let chat: Vec<String> = roles
            .iter()
            .copied()
            .filter(|r| !r.is_embedding())
            .chain(judge)
            .flat_map(|r| self.role_endpoints(r))
            .collect();
        self.role_endpoints(Role::Embedding)
            .into_iter()
            .filter(|e| chat.contains(e))
            .filter(|e| self.endpoints.get(e).is_some_and(|c| !c.is_embedded_sim()))
            .map(|e| {
                ConfigIssue::new(
                    "",
                    "roles.embedding.group",
                    format!(
                        "endpoint `{e}` serves the embedding role and chat roles too; a vLLM \
                         or SGLang server serves one model: point roles.embedding.group at a \
                         group of embeddings servers (and keep them out of the chat roles' \
                         groups)"
                    ),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chat endpoint `a`, the embeddings server `e` and the simulator `b`, for RSE
    /// with embeddings; then `extra` (groups and roles).
    fn rse_with(extra: &str) -> Config {
        let text = format!(
            r#"
[method]
name = "rse"
rse_dedup = "embeddings"
[endpoints.a]
base_url = "http://127.0.0.1:8000/v1"
model = "big"
[endpoints.e]
base_url = "http://127.0.0.1:8002/v1"
model = "bge"
[endpoints.b]
base_url = "embedded-sim"
model = "tmas-sim"
{extra}"#
        );
        Config::from_toml_str(&text, "t").expect("valid")
    }

    fn warned(c: &Config) -> Vec<String> {
        c.endpoint_sharing_issues()
            .into_iter()
            .inspect(|i| assert_eq!(i.path, "roles.embedding.group"))
            .map(|i| i.message)
            .collect()
    }

    /// An endpoint asked for embeddings and for chat completions by the method's roles or
    /// the judge is warned about; the simulator, which answers both, is not.
    #[test]
    fn an_endpoint_serving_embeddings_and_chat_roles_is_warned_about() {
        // Every role on the implicit default group: `a` and `e` get both kinds of call.
        let w = warned(&rse_with(""));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("endpoint `a` serves the embedding role"),
            "{w:?}"
        );
        // The embeddings server in a group of its own, the chat roles kept off it.
        let own = "[groups]\ndefault = [\"a\", \"b\"]\nembed = [\"e\", \"b\"]\n\
                   [roles.embedding]\ngroup = \"embed\"\n";
        assert!(warned(&rse_with(own)).is_empty());
        // … unless the judge is sent there too; not when the LLM judge is off.
        let mut judged = rse_with(&format!("{own}[roles.judge]\ngroup = \"embed\"\n"));
        let w = warned(&judged);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("endpoint `e`"), "{w:?}");
        judged.judge.enabled = false;
        assert!(warned(&judged).is_empty());
        // Without embeddings, nothing.
        judged.judge.enabled = true;
        judged.method.rse_dedup = crate::config::BankDedup::Jaccard;
        assert!(warned(&judged).is_empty());
    }
}
