//! glen's `Agent` over rein's loop: the config object, `processMessage`, `abort`,
//! `clearHistory`, `setModel`, `setSystemPrompt` and `autoApprove`.
//!
//! One turn at a time: `processMessage` takes rein's `Agent` out of the shared state for the
//! turn and puts it back after, so the state is never borrowed across an await. A turn paused
//! at a checkpoint stays in the agent and is continued by the next message.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use rein_agent::{AgentConfig, CancellationToken};
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::callbacks::{Callbacks, ProposalApprover};
use crate::config;
use crate::js::{Held, from_js, js_error, set};
use crate::registry::RegistryCore;

struct State {
    config: Value,
    client_name: String,
    host: Arc<Held>,
    model: Option<String>,
    system_prompt: String,
    auto_approve: bool,
    /// rein's agent; `None` during a turn.
    agent: Option<rein_agent::Agent>,
    running: bool,
    cancel: Option<CancellationToken>,
    clear_after_turn: bool,
}

/// The agent behind glen's `Agent` class (`index.js` passes the class instance as `host`,
/// whose `on*` properties are the callbacks).
#[wasm_bindgen]
pub struct AgentCore {
    state: Rc<RefCell<State>>,
}

#[wasm_bindgen]
impl AgentCore {
    /// An agent with glen's config object.
    #[wasm_bindgen(constructor)]
    pub fn new(config: JsValue, client_name: String, host: JsValue) -> AgentCore {
        let config = from_js(&config);
        let auto_approve = config.get("auto_approve").and_then(Value::as_bool).unwrap_or(true);
        AgentCore {
            state: Rc::new(RefCell::new(State {
                model: config::initial_model(&config),
                config,
                client_name,
                host: Arc::new(Held::new(host)),
                system_prompt: String::new(),
                auto_approve,
                agent: None,
                running: false,
                cancel: None,
                clear_after_turn: false,
            })),
        }
    }

    /// Sets the system prompt for the next requests.
    #[wasm_bindgen(js_name = setSystemPrompt)]
    pub fn set_system_prompt(&self, text: String) {
        self.state.borrow_mut().system_prompt = text;
    }

    /// Selects the model with this `value` from `llm_models`.
    #[wasm_bindgen(js_name = setModel)]
    pub fn set_model(&self, value: String) -> Result<(), JsValue> {
        let mut state = self.state.borrow_mut();
        if !config::models(&state.config)
            .iter()
            .any(|m| m.get("value").and_then(Value::as_str) == Some(&value))
        {
            return Err(js_error(&format!("no model `{value}` in llm_models")));
        }
        state.model = Some(value);
        Ok(())
    }

    /// The selected model's value.
    #[wasm_bindgen(getter)]
    pub fn model(&self) -> Option<String> {
        self.state.borrow().model.clone()
    }

    /// Whether remote tools run without asking (glen's default: yes).
    #[wasm_bindgen(getter, js_name = autoApprove)]
    pub fn auto_approve(&self) -> bool {
        self.state.borrow().auto_approve
    }

    /// Turns auto-approve on or off (from the next round).
    #[wasm_bindgen(setter, js_name = autoApprove)]
    pub fn set_auto_approve(&self, on: bool) {
        self.state.borrow_mut().auto_approve = on;
    }

    /// Stops the turn in flight at its next await, the model request included.
    pub fn abort(&self) {
        if let Some(cancel) = &self.state.borrow().cancel {
            cancel.cancel();
        }
    }

    /// Forgets the conversation (and a turn paused at a checkpoint).
    #[wasm_bindgen(js_name = clearHistory)]
    pub fn clear_history(&self) {
        let state = &mut *self.state.borrow_mut();
        match &mut state.agent {
            Some(agent) => {
                agent.clear_history();
                agent.discard_checkpoint();
            }
            None if state.running => state.clear_after_turn = true,
            None => {}
        }
    }

    /// Runs one turn with the registry's tools; resolves to `{response, ending, steps,
    /// toolRounds}`.
    #[wasm_bindgen(js_name = processMessage)]
    pub fn process_message(&self, text: String, registry: &RegistryCore) -> js_sys::Promise {
        let state = Rc::clone(&self.state);
        let prepared = prepare(&state, registry);
        wasm_bindgen_futures::future_to_promise(async move {
            let (mut agent, cancel, callbacks) = prepared.map_err(|message| js_error(&message))?;
            let outcome = agent.turn(text, &cancel, callbacks.as_ref()).await;
            {
                let mut state = state.borrow_mut();
                if std::mem::take(&mut state.clear_after_turn) {
                    agent.clear_history();
                    agent.discard_checkpoint();
                }
                state.agent = Some(agent);
                state.running = false;
                state.cancel = None;
            }
            let outcome = outcome.map_err(|error| js_error(&error.to_string()))?;
            let answer = js_sys::Object::new();
            set(&answer, "response", &outcome.text.as_str().into());
            set(&answer, "ending", &outcome.ending.as_str().into());
            set(&answer, "steps", &outcome.steps.into());
            set(&answer, "toolRounds", &outcome.tool_rounds.into());
            Ok(answer.into())
        })
    }
}

/// Takes the agent out for a turn, with the model, tools and settings of now.
fn prepare(
    state: &Rc<RefCell<State>>,
    registry: &RegistryCore,
) -> Result<(rein_agent::Agent, CancellationToken, Arc<Callbacks>), String> {
    let mut state = state.borrow_mut();
    if state.running {
        return Err("a turn is already running; abort() it or wait for it".to_owned());
    }
    let value = state.model.clone().ok_or("llm_models names no model")?;
    let model = config::model(&state.config, &value, &state.client_name)?;
    let tools = Arc::new(registry.build()?);
    let mut agent_config = AgentConfig::default();
    if let Some(n) = config::count(&state.config, "max_tool_calls") {
        agent_config.max_tool_calls = n;
    }
    if let Some(n) = config::count(&state.config, "max_tool_calls_manual") {
        agent_config.max_tool_calls_manual = n;
    }
    agent_config.auto_approve = state.auto_approve;
    agent_config.system_prompt = state.system_prompt.clone();
    let callbacks = Callbacks::new(Arc::clone(&state.host), Arc::clone(&tools), state.auto_approve);
    let mut agent = match state.agent.take() {
        Some(mut agent) => {
            agent.set_model(model);
            agent.set_tools(Arc::clone(&tools));
            let budget = agent.config().budget.clone();
            agent_config.budget = budget;
            *agent.config_mut() = agent_config;
            agent
        }
        None => rein_agent::Agent::new(model, tools, agent_config),
    };
    agent.set_approver(Some(Arc::new(ProposalApprover(Arc::clone(&callbacks)))));
    let cancel = CancellationToken::new();
    state.running = true;
    state.cancel = Some(cancel.clone());
    Ok((agent, cancel, callbacks))
}
