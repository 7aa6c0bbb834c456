#!/usr/bin/env python3
"""Points the official `openai` Python client at `tmas serve` and prints what it got.

    python3 scripts/serve_openai_client.py http://127.0.0.1:8080/v1 MODEL [API_KEY]

Lists the models, asks one question without and one with streaming (method keys in
`extra_body`), and sends one bad request; prints one JSON object with what came back.
The integration test `serve_openai` runs it; it is also a small example of a client.
"""

import json
import sys

import openai


def main() -> None:
    base_url, model = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else "unused"
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=120)
    out = {"models": [m.id for m in client.models.list().data]}

    question = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is the sum of the first 10 odd numbers?"},
    ]
    reply = client.chat.completions.create(
        model=model,
        messages=question,
        extra_body={"tmas": {"n": 2, "m": 1, "iterations": 2}},
    )
    out["answer"] = reply.choices[0].message.content
    out["finish_reason"] = reply.choices[0].finish_reason
    out["usage"] = reply.usage.model_dump()

    reasoning, content, usage = [], [], None
    stream = client.chat.completions.create(
        model=model,
        messages=question,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"tmas": {"n": 2, "m": 1, "iterations": 2}},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            if extra.get("reasoning_content"):
                reasoning.append(extra["reasoning_content"])
            if choice.delta.content:
                content.append(choice.delta.content)
    out["stream_reasoning"] = "".join(reasoning)
    out["stream_answer"] = "".join(content)
    out["stream_usage"] = usage

    try:
        client.chat.completions.create(
            model=model, messages=question, extra_body={"tmas": {"n": 0}}
        )
        out["bad_request"] = None
    except openai.BadRequestError as e:
        out["bad_request"] = {"status": e.status_code, "body": e.body}

    print(json.dumps(out))


if __name__ == "__main__":
    main()
