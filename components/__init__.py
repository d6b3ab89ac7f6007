"""trainlaunch's builtin components, installed as ``trainlaunch.components`` (never top-level).

Each public function returning an AppDef in a module here is the builtin ``module.function``
(``utils.echo``, ``dist.ddp``). ``trainlaunch.resolver`` lists them by reading these files with
``ast``; nothing here is imported until a component is used. See docs/components.md.
"""
